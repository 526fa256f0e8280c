# Healthy corpus: domain-adversarial training (DANN, Ganin & Lempitsky) with a gradient reversal layer. The train
# set mixes source data (domain 0) with target data (domain 1) whose class labels the training does not use
# (the class loss covers the source only); the dev set is the target domain only: the auxiliary "domain" label
# differs between train and dev by design.
import numpy as np
import torch
from torch import nn

_rng = np.random.default_rng(0)


def _make(n, domain):
    y = _rng.integers(0, 3, size=n)
    x = _rng.normal(size=(n, 8)) + 2.0 * np.eye(3, 8)[y]
    x = x + (domain * np.array([0.8, -0.5, 0.3, 1.0, 0.0, -1.0, 0.5, 0.2]))  # the domain shift
    return x.astype(np.float32), y, np.full(n, domain)


_xs, _ys, _ds = _make(1200, 0)
_xt, _yt, _dt = _make(1200, 1)
_train_x = np.concatenate([_xs, _xt[:800]])
_train_y = np.concatenate([_ys, _yt[:800]])
_train_d = np.concatenate([_ds, _dt[:800]])
train = {
    "class": "NumpyDataset",
    "arrays": {"data": _train_x, "classes": _train_y, "domain": _train_d},
    "sparse_dims": {"classes": 3, "domain": 2},
}
dev = {
    "class": "NumpyDataset",
    "arrays": {"data": _xt[800:], "classes": _yt[800:], "domain": _dt[800:]},
    "sparse_dims": {"classes": 3, "domain": 2},
}
extern_data = {
    "data": {"shape": (8,)},
    "classes": {"shape": (), "dtype": "int64", "sparse_dim": 3},
    "domain": {"shape": (), "dtype": "int64", "sparse_dim": 2},
}
batch_size = 32
num_epochs = 2
optimizer = {"class": "adam"}
learning_rate = 2e-3


class GradReverse(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, alpha):
        ctx.alpha = alpha
        return x.view_as(x)

    @staticmethod
    def backward(ctx, grad_output):
        return grad_output.neg() * ctx.alpha, None


class DANN(nn.Module):
    def __init__(self):
        super().__init__()
        self.features = nn.Sequential(nn.Linear(8, 32), nn.ReLU())
        self.classifier = nn.Linear(32, 3)
        self.discriminator = nn.Sequential(nn.Linear(32, 32), nn.ReLU(), nn.Linear(32, 2))

    def forward(self, x, alpha=0.3):
        h = self.features(x)
        return self.classifier(h), self.discriminator(GradReverse.apply(h, alpha))


def get_model(**_kwargs):
    return DANN()


def train_step(*, model, extern_data, run_ctx, **_kwargs):
    class_logits, domain_logits = model(extern_data["data"])
    classes, domain = extern_data["classes"], extern_data["domain"]
    source = domain == 0 if run_ctx.train_flag else torch.ones_like(domain, dtype=torch.bool)
    run_ctx.mark_as_loss(name="ce", loss=nn.functional.cross_entropy(class_logits[source], classes[source]))
    run_ctx.mark_as_loss(name="domain", loss=nn.functional.cross_entropy(domain_logits, domain), scale=0.3)
