# Corpus bug (open-mmlab/mmselfsup#159): SimCLR concatenates the two augmented views of a batch as
# [x_0 .. x_{N-1}, x'_0 .. x'_{N-1}], but the positive-pair targets assume interleaved views, (0, 1), (2, 3), ...,
# so each sample's "positive" is a view of another image and its real partner is scored as a negative. Task:
# self-supervised pretraining of an MLP encoder on 32-d inputs whose first 8 dims carry the object (a class centre
# plus the instance's own offset) and whose other 24 dims are large nuisance that each augmentation redraws; NT-Xent
# at temperature 0.5 on a projection head. A linear probe on the detached encoder features is trained alongside on the
# labels (the usual online evaluation; no gradient reaches the encoder), and the error is the probe's dev error.
# Twin: ++bug False (the positive of i is i + N mod 2N).
import numpy as np
import torch
from torch import nn

from framework.datasets.numpy_dataset import NumpyDataset

bug = True
SIGNAL, NUISANCE, CLASSES, TAU = 8, 24, 6, 0.5
CENTRES = 1.5 * np.random.default_rng(8).normal(size=(CLASSES, SIGNAL))


class Objects(NumpyDataset):
    def __init__(self, split, **kwargs):
        rng = np.random.default_rng(0 if split == "train" else 1)
        labels = rng.integers(0, CLASSES, size=3000 if split == "train" else 500)
        signal = CENTRES[labels] + 0.7 * rng.normal(size=(len(labels), SIGNAL))
        x = np.concatenate([signal, 2.0 * rng.normal(size=(len(labels), NUISANCE))], axis=1)
        super().__init__({"data": x.astype(np.float32), "classes": labels}, sparse_dims={"classes": CLASSES}, **kwargs)


train = {"class": Objects, "split": "train"}
dev = {"class": Objects, "split": "dev"}
extern_data = {
    "data": {"shape": (SIGNAL + NUISANCE,)},
    "classes": {"shape": (), "dtype": "int64", "sparse_dim": CLASSES},
}
batch_size = 64
num_epochs = 5
learning_rate = 2e-3


class SimCLR(nn.Module):
    def __init__(self):
        super().__init__()
        dim = SIGNAL + NUISANCE
        self.encoder = nn.Sequential(nn.Linear(dim, 128), nn.ReLU(), nn.Linear(128, 64), nn.ReLU())
        self.projection = nn.Sequential(nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 32))
        self.probe = nn.Linear(64, CLASSES)


def get_model(**_kwargs):
    return SimCLR()


def augment(x):
    nuisance = 2.0 * torch.randn(x.shape[0], NUISANCE, device=x.device)  # redrawn per view
    return torch.cat([x[:, :SIGNAL] + 0.2 * torch.randn_like(x[:, :SIGNAL]), nuisance], dim=1)


def nt_xent(z):
    n2 = z.shape[0]
    n = n2 // 2
    z = nn.functional.normalize(z, dim=1)
    similarity = (z @ z.t() / TAU).masked_fill(torch.eye(n2, dtype=torch.bool, device=z.device), float("-inf"))
    index = torch.arange(n2, device=z.device)
    positives = index ^ 1 if bug else (index + n) % n2  # the views are concatenated, not interleaved
    return nn.functional.cross_entropy(similarity, positives)


def train_step(*, model, extern_data, run_ctx, **_kwargs):
    x, targets = extern_data["data"], extern_data["classes"]
    if model.training:
        views = torch.cat([augment(x), augment(x)], dim=0)
        run_ctx.mark_as_loss(name="nt_xent", loss=nt_xent(model.projection(model.encoder(views))))
    logits = model.probe(model.encoder(x).detach())
    run_ctx.mark_as_loss(name="probe_ce", loss=nn.functional.cross_entropy(logits, targets))
    run_ctx.mark_as_loss(name="err", loss=(logits.argmax(-1) != targets).float().mean(), as_error=True)
