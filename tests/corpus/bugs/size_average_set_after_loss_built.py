# Corpus bug (azpoliak/robust-nli#5): the InferSent-based training builds nn.CrossEntropyLoss(weight=weight) and then
# sets loss_fn.size_average = False; the module's reduction is fixed at construction, so the attribute does nothing
# and the loss stays a mean, while the training loop still divides every gradient by the batch size k before the SGD
# step (meant to turn the summed loss into a mean): each update is k = 64 times smaller than intended. Task: an
# NLI-like 3-way classification of sentence-embedding pairs with InferSent's classifier on [u, v, |u - v|, u * v]
# and its optimizer (SGD, rate 0.1, batches of 64); the loop's division is part of the optimizer step here. Twin:
# ++bug False (nn.CrossEntropyLoss(weight=weight, reduction='sum')).
import numpy as np
import torch
from torch import nn

from framework.datasets.numpy_dataset import NumpyDataset

bug = True
DIM, CLASSES, BATCH = 16, 3, 64


class Pairs(NumpyDataset):
    def __init__(self, split, **kwargs):
        rng = np.random.default_rng(0 if split == "train" else 1)
        n = 4000 if split == "train" else 600
        u = rng.normal(size=(n, DIM))
        labels = rng.integers(0, CLASSES, size=n)  # 0 entailment (close), 1 neutral (unrelated), 2 contradiction
        v = np.where(labels[:, None] == 0, u, np.where(labels[:, None] == 2, -u, rng.normal(size=(n, DIM))))
        v = v + 0.8 * rng.normal(size=(n, DIM))
        arrays = {"u": u.astype(np.float32), "v": v.astype(np.float32), "classes": labels}
        super().__init__(arrays, sparse_dims={"classes": CLASSES}, **kwargs)


def build_loss(weight):
    if bug:
        loss_fn = nn.CrossEntropyLoss(weight=weight)
        loss_fn.size_average = False  # no effect: the reduction ('mean') was fixed when the module was built
        return loss_fn
    return nn.CrossEntropyLoss(weight=weight, reduction="sum")


class InferSentSGD(torch.optim.SGD):
    """The training loop's step: divide the gradients by the batch size, then SGD."""

    @torch.no_grad()
    def step(self, closure=None):
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is not None:
                    p.grad.div_(BATCH)
        return super().step(closure)


train = {"class": Pairs, "split": "train"}
dev = {"class": Pairs, "split": "dev"}
extern_data = {
    "u": {"shape": (DIM,)},
    "v": {"shape": (DIM,)},
    "classes": {"shape": (), "dtype": "int64", "sparse_dim": CLASSES},
}
batch_size = BATCH
num_epochs = 4
learning_rate = 0.1
optimizer = {"class": InferSentSGD}


def get_model(**_kwargs):
    return nn.Sequential(nn.Linear(4 * DIM, 128), nn.Tanh(), nn.Linear(128, CLASSES))


def train_step(*, model, extern_data, run_ctx, **_kwargs):
    u, v, targets = extern_data["u"], extern_data["v"], extern_data["classes"]
    logits = model(torch.cat([u, v, (u - v).abs(), u * v], dim=-1))
    loss = build_loss(torch.ones(CLASSES, device=logits.device))(logits, targets)
    run_ctx.mark_as_loss(name="ce", loss=loss)
    run_ctx.mark_as_loss(name="err", loss=(logits.argmax(-1) != targets).float().mean(), as_error=True)
