# Healthy corpus: MoCo (He et al. 2020): a query encoder trained by InfoNCE (temperature 0.2) against keys from a
# momentum encoder, an EMA copy (0.99) that gets no gradient and is updated after each optimizer step, with the 512
# keys of earlier batches kept in a queue (a buffer) as negatives. Task: 32-d inputs whose first 8 dims carry the
# object (a class centre plus the instance's offset) and whose other 24 dims are nuisance that each augmentation
# redraws. A linear probe on the detached query features is trained alongside; 'err' is its dev error.
import copy

import numpy as np
import torch
from torch import nn

from framework.datasets.numpy_dataset import NumpyDataset

SIGNAL, NUISANCE, CLASSES, TAU, QUEUE, MOMENTUM = 8, 24, 6, 0.2, 512, 0.99
CENTRES = 1.5 * np.random.default_rng(111).normal(size=(CLASSES, SIGNAL))


class Objects(NumpyDataset):
    def __init__(self, split, **kwargs):
        rng = np.random.default_rng(0 if split == "train" else 1)
        labels = rng.integers(0, CLASSES, size=3000 if split == "train" else 500)
        signal = CENTRES[labels] + 0.7 * rng.normal(size=(len(labels), SIGNAL))
        x = np.concatenate([signal, 2.0 * rng.normal(size=(len(labels), NUISANCE))], axis=1)
        super().__init__({"data": x.astype(np.float32), "classes": labels}, sparse_dims={"classes": CLASSES}, **kwargs)


def encoder():
    return nn.Sequential(nn.Linear(SIGNAL + NUISANCE, 128), nn.ReLU(), nn.Linear(128, 64), nn.ReLU())


class MoCo(nn.Module):
    def __init__(self):
        super().__init__()
        self.query = encoder()
        self.query_head = nn.Linear(64, 32)
        self.key = copy.deepcopy(self.query).requires_grad_(False)
        self.key_head = copy.deepcopy(self.query_head).requires_grad_(False)
        self.probe = nn.Linear(64, CLASSES)
        self.register_buffer("queue", nn.functional.normalize(torch.randn(QUEUE, 32), dim=1))
        self.register_buffer("pointer", torch.zeros((), dtype=torch.long))

    @torch.no_grad()
    def momentum_update(self):
        for online, target in ((self.query, self.key), (self.query_head, self.key_head)):
            for p, q in zip(online.parameters(), target.parameters(), strict=True):
                q.mul_(MOMENTUM).add_(p.detach(), alpha=1 - MOMENTUM)

    @torch.no_grad()
    def enqueue(self, keys):
        n = keys.shape[0]
        index = (self.pointer + torch.arange(n, device=keys.device)) % QUEUE
        self.queue[index] = keys
        self.pointer.copy_((self.pointer + n) % QUEUE)


def get_model(**_kwargs):
    return MoCo()


def augment(x):
    nuisance = 2.0 * torch.randn(x.shape[0], NUISANCE, device=x.device)
    return torch.cat([x[:, :SIGNAL] + 0.2 * torch.randn_like(x[:, :SIGNAL]), nuisance], dim=1)


def after_update(state):
    state.model.momentum_update()


train = {"class": Objects, "split": "train"}
dev = {"class": Objects, "split": "dev"}
extern_data = {
    "data": {"shape": (SIGNAL + NUISANCE,)},
    "classes": {"shape": (), "dtype": "int64", "sparse_dim": CLASSES},
}
batch_size = 64
num_epochs = 5
learning_rate = 2e-3
callbacks = {"after_optimizer_step": after_update}


def train_step(*, model, extern_data, run_ctx, **_kwargs):
    x, targets = extern_data["data"], extern_data["classes"]
    if model.training:
        q = nn.functional.normalize(model.query_head(model.query(augment(x))), dim=1)
        with torch.no_grad():
            k = nn.functional.normalize(model.key_head(model.key(augment(x))), dim=1)
        logits = torch.cat([(q * k).sum(1, keepdim=True), q @ model.queue.clone().t()], dim=1) / TAU
        zeros = torch.zeros(x.shape[0], dtype=torch.long, device=x.device)  # the positive key is column 0
        run_ctx.mark_as_loss(name="info_nce", loss=nn.functional.cross_entropy(logits, zeros))
        model.enqueue(k)
    logits = model.probe(model.query(x).detach())
    run_ctx.mark_as_loss(name="probe_ce", loss=nn.functional.cross_entropy(logits, targets))
    run_ctx.mark_as_loss(name="err", loss=(logits.argmax(-1) != targets).float().mean(), as_error=True)
