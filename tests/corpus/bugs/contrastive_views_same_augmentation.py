# Corpus bug (Project-MONAI/tutorials#468, issue #467): the contrastive tutorial made its two views of an image with
# one call of the random augmentation over both copies, so the two views got exactly the same transform; the positive
# pair was two identical inputs and the task could be solved from anything that identifies the instance, the
# augmentation's own nuisances included. Task: self-supervised pretraining of an MLP encoder on 32-d inputs whose
# first 8 dims carry the object (a class centre plus the instance's own offset) and whose other 24 dims are large
# nuisance that the augmentation draws; NT-Xent at temperature 0.5 on a projection head. A linear probe on the
# detached encoder features is trained alongside (no gradient reaches the encoder); the error is its dev error.
# Twin: ++bug False (one augmentation call per view).
import numpy as np
import torch
from torch import nn

from framework.datasets.numpy_dataset import NumpyDataset

bug = True
SIGNAL, NUISANCE, CLASSES, TAU = 8, 24, 6, 0.5
CENTRES = 1.5 * np.random.default_rng(18).normal(size=(CLASSES, SIGNAL))


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


def augment(*images):
    """One random draw (jitter of the object, new nuisance) applied to every image given."""
    x = images[0]
    jitter = 0.2 * torch.randn(x.shape[0], SIGNAL, device=x.device)
    nuisance = 2.0 * torch.randn(x.shape[0], NUISANCE, device=x.device)
    return [torch.cat([image[:, :SIGNAL] + jitter, nuisance], dim=1) for image in images]


def two_views(x):
    if bug:  # read at call time: ++bug False applies after the file ran
        return augment(x, x)  # both copies in one call: the same transform
    return augment(x) + augment(x)


def nt_xent(z):
    n2 = z.shape[0]
    z = nn.functional.normalize(z, dim=1)
    similarity = (z @ z.t() / TAU).masked_fill(torch.eye(n2, dtype=torch.bool, device=z.device), float("-inf"))
    positives = (torch.arange(n2, device=z.device) + n2 // 2) % n2
    return nn.functional.cross_entropy(similarity, positives)


def train_step(*, model, extern_data, run_ctx, **_kwargs):
    x, targets = extern_data["data"], extern_data["classes"]
    if model.training:
        views = torch.cat(two_views(x), dim=0)
        run_ctx.mark_as_loss(name="nt_xent", loss=nt_xent(model.projection(model.encoder(views))))
    logits = model.probe(model.encoder(x).detach())
    run_ctx.mark_as_loss(name="probe_ce", loss=nn.functional.cross_entropy(logits, targets))
    run_ctx.mark_as_loss(name="err", loss=(logits.argmax(-1) != targets).float().mean(), as_error=True)
