# Corpus bug (WenjieDu/PyPOTS#667): the trainer kept the best model seen so far as
# self.best_model_dict = self.model.state_dict() and loaded it back when training ended; state_dict() returns
# references to the live parameters, so the kept 'best' state changed with every later update and the restored model
# was the last, overfitted one. Task: 6 classes of 30-d Gaussian clusters with 40% of the training labels replaced
# at random (600 examples), a wide MLP trained for 14 epochs, which fits the noise after the first few. The user's
# validation (a callback at the start of each evaluation, on a clean validation set of its own) keeps the best state
# and restores it before the last epoch's evaluation, as the trainer restores it at the end. Twin: ++bug False
# (copy.deepcopy of the state dict).
import copy

import numpy as np
import torch
from torch import nn

from framework.datasets.numpy_dataset import NumpyDataset

bug = True
DIM, CLASSES, EPOCHS = 30, 6, 14
CENTRES = np.random.default_rng(7).normal(size=(CLASSES, DIM)) * 0.45


def examples(seed, n, noisy):
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, CLASSES, size=n)
    x = CENTRES[labels] + rng.normal(size=(n, DIM))
    if noisy:
        labels = np.where(rng.random(n) < 0.4, rng.integers(0, CLASSES, size=n), labels)
    return x.astype(np.float32), labels


class Clusters(NumpyDataset):
    def __init__(self, split, **kwargs):
        x, labels = examples(0 if split == "train" else 1, 600 if split == "train" else 1000, split == "train")
        super().__init__({"data": x, "classes": labels}, sparse_dims={"classes": CLASSES}, **kwargs)


VALIDATION = examples(2, 300, False)
BEST = {"loss": float("inf"), "state": None, "epoch": 0}


def keep_best(state):
    """The trainer's validation: keep the best state so far, and restore it when the last epoch is evaluated."""
    model = state.model
    device = next(model.parameters()).device
    model.eval()
    with torch.no_grad():
        logits = model(torch.from_numpy(VALIDATION[0]).to(device))
        loss = nn.functional.cross_entropy(logits, torch.from_numpy(VALIDATION[1]).to(device)).item()
    if loss < BEST["loss"]:
        BEST["loss"], BEST["epoch"] = loss, state.epoch
        BEST["state"] = model.state_dict() if bug else copy.deepcopy(model.state_dict())  # bug: references
    state.control.note_step("val_loss", f"{loss:.3f} (best {BEST['loss']:.3f} at epoch {BEST['epoch']})")
    if state.epoch == EPOCHS:
        model.load_state_dict(BEST["state"])  # the end of training: back to the best model


train = {"class": Clusters, "split": "train"}
dev = {"class": Clusters, "split": "dev"}
extern_data = {"data": {"shape": (DIM,)}, "classes": {"shape": (), "dtype": "int64", "sparse_dim": CLASSES}}
batch_size = 32
num_epochs = EPOCHS
learning_rate = 1e-3
callbacks = {"eval_start": keep_best}


def get_model(**_kwargs):
    return nn.Sequential(nn.Linear(DIM, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(), nn.Linear(512, CLASSES))


def train_step(*, model, extern_data, run_ctx, **_kwargs):
    logits = model(extern_data["data"])
    targets = extern_data["classes"]
    run_ctx.mark_as_loss(name="ce", loss=nn.functional.cross_entropy(logits, targets))
    run_ctx.mark_as_loss(name="err", loss=(logits.argmax(-1) != targets).float().mean(), as_error=True)
