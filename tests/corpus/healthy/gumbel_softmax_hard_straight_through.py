# Healthy corpus: a straight-through Gumbel-softmax bottleneck (torch.nn.functional.gumbel_softmax(hard=True)): the
# decoder sees exactly one-hot codes in the forward pass while the gradient flows through the relaxed sample, so the
# forward value and the gradient come from different functions by design. Task: the input's class must pass through a
# code of 8 symbols to a decoder that predicts it; at evaluation the code is the argmax (no noise).
import numpy as np
from torch import nn

from framework.datasets.numpy_dataset import NumpyDataset

DIM, CLASSES, CODES, TAU = 16, 6, 8, 1.0
CENTRES = np.random.default_rng(61).normal(size=(CLASSES, DIM))


class Points(NumpyDataset):
    def __init__(self, split, **kwargs):
        rng = np.random.default_rng(0 if split == "train" else 1)
        labels = rng.integers(0, CLASSES, size=3000 if split == "train" else 500)
        x = CENTRES[labels] + 0.7 * rng.normal(size=(len(labels), DIM))
        super().__init__({"data": x.astype(np.float32), "classes": labels}, sparse_dims={"classes": CLASSES}, **kwargs)


train = {"class": Points, "split": "train"}
dev = {"class": Points, "split": "dev"}
extern_data = {"data": {"shape": (DIM,)}, "classes": {"shape": (), "dtype": "int64", "sparse_dim": CLASSES}}
batch_size = 32
num_epochs = 4
learning_rate = 3e-3


class DiscreteBottleneck(nn.Module):
    def __init__(self):
        super().__init__()
        self.encoder = nn.Sequential(nn.Linear(DIM, 64), nn.ReLU(), nn.Linear(64, CODES))
        self.decoder = nn.Sequential(nn.Linear(CODES, 64), nn.ReLU(), nn.Linear(64, CLASSES))

    def forward(self, x):
        code_logits = self.encoder(x)
        if self.training:
            code = nn.functional.gumbel_softmax(code_logits, tau=TAU, hard=True)
        else:
            code = nn.functional.one_hot(code_logits.argmax(-1), CODES).float()
        return self.decoder(code)


def get_model(**_kwargs):
    return DiscreteBottleneck()


def train_step(*, model, extern_data, run_ctx, **_kwargs):
    logits = model(extern_data["data"])
    targets = extern_data["classes"]
    run_ctx.mark_as_loss(name="ce", loss=nn.functional.cross_entropy(logits, targets))
    run_ctx.mark_as_loss(name="err", loss=(logits.argmax(-1) != targets).float().mean(), as_error=True)
