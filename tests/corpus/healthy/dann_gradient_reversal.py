# Healthy corpus: domain-adversarial training (DANN). A feature extractor feeds a label classifier trained on the
# labelled source domain and, through a gradient reversal layer (identity forward, gradient times -lambda backward),
# a domain classifier. The domain loss stays near chance (log 2) by design: the features are pushed to confuse it.
# The dev set is the target domain (shifted inputs); its error falls as the features align.
import numpy as np
import torch
from torch import nn

from framework.datasets.numpy_dataset import NumpyDataset

DIM, CLASSES, LAMBDA = 10, 2, 0.3
SHIFT = np.random.default_rng(3).normal(size=DIM) * 1.5


def make(rng, n, shift):
    labels = rng.integers(0, CLASSES, size=n)
    x = rng.normal(size=(n, DIM))
    x[:, 0] += np.where(labels == 1, 1.8, -1.8)
    return (x + shift).astype(np.float32), labels


class Domains(NumpyDataset):
    def __init__(self, split, **kwargs):
        rng = np.random.default_rng(0 if split == "train" else 1)
        if split == "train":  # labelled source examples and unlabelled target examples, interleaved
            xs, ys = make(rng, 2000, 0.0)
            xt, _ = make(rng, 2000, SHIFT)
            x, labels, domain = (
                np.concatenate([xs, xt]),
                np.concatenate([ys, np.zeros_like(ys)]),
                np.repeat([0, 1], 2000),
            )
        else:  # the target domain, with its labels for evaluation
            x, labels = make(rng, 600, SHIFT)
            domain = np.ones(600, dtype=np.int64)
        arrays = {"data": x, "classes": labels, "domain": domain.astype(np.int64)}
        super().__init__(arrays, sparse_dims={"classes": CLASSES, "domain": 2}, **kwargs)


train = {"class": Domains, "split": "train"}
dev = {"class": Domains, "split": "dev"}
extern_data = {
    "data": {"shape": (DIM,)},
    "classes": {"shape": (), "dtype": "int64", "sparse_dim": CLASSES},
    "domain": {"shape": (), "dtype": "int64", "sparse_dim": 2},
}
batch_size = 64
num_epochs = 4
learning_rate = 1e-3


class GradientReversal(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, strength):
        ctx.strength = strength
        return x.view_as(x)

    @staticmethod
    def backward(ctx, grad):
        return -ctx.strength * grad, None


class Dann(nn.Module):
    def __init__(self):
        super().__init__()
        self.features = nn.Sequential(nn.Linear(DIM, 32), nn.ReLU(), nn.Linear(32, 32), nn.ReLU())
        self.label_classifier = nn.Linear(32, CLASSES)
        self.domain_classifier = nn.Sequential(nn.Linear(32, 32), nn.ReLU(), nn.Linear(32, 2))


def get_model(**_kwargs):
    return Dann()


def train_step(*, model, extern_data, run_ctx, **_kwargs):
    features = model.features(extern_data["data"])
    logits = model.label_classifier(features)
    targets, domain = extern_data["classes"], extern_data["domain"]
    labelled = domain == 0 if run_ctx.train_flag else torch.ones_like(domain, dtype=torch.bool)
    class_loss = (
        nn.functional.cross_entropy(logits[labelled], targets[labelled]) if labelled.any() else logits.sum() * 0
    )
    run_ctx.mark_as_loss(name="ce", loss=class_loss)
    domain_logits = model.domain_classifier(GradientReversal.apply(features, LAMBDA))
    run_ctx.mark_as_loss(name="domain", loss=nn.functional.cross_entropy(domain_logits, domain))
    wrong = (logits.argmax(-1) != targets)[labelled].float()
    run_ctx.mark_as_loss(name="err", loss=wrong.mean() if len(wrong) else wrong.sum(), as_error=True)
