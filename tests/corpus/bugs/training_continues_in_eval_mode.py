# Corpus bug (wkentaro/pytorch-fcn#56): the trainer validated every interval_validate iterations inside an epoch and
# called model.eval() for it, but model.train() only at the start of each epoch, so after the first validation the
# rest of the epoch trained in evaluation mode: dropout off, BatchNorm normalising with running statistics that no
# longer update. Task: 5-class classification of raw (unstandardised, offset) 20-d features with 30% noisy training
# labels, by an MLP with BatchNorm and dropout 0.5; the trainer's own validation (a callback after every 8th step, on
# a held-out batch) sets eval mode. Twin: ++bug False (the validation puts the model back in training mode).
import numpy as np
import torch
from torch import nn

from framework.datasets.numpy_dataset import NumpyDataset

bug = True
DIM, CLASSES, VAL_EVERY = 20, 5, 8
CENTRES = np.random.default_rng(3).normal(size=(CLASSES, DIM))


def examples(seed, n, noisy):
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, CLASSES, size=n)
    x = 30.0 + 12.0 * (CENTRES[labels] + 1.3 * rng.normal(size=(n, DIM)))
    if noisy:
        flip = rng.random(n) < 0.3
        labels = np.where(flip, rng.integers(0, CLASSES, size=n), labels)
    return x.astype(np.float32), labels


class Features(NumpyDataset):
    def __init__(self, split, **kwargs):
        x, labels = examples(0 if split == "train" else 1, 800 if split == "train" else 600, split == "train")
        super().__init__({"data": x, "classes": labels}, sparse_dims={"classes": CLASSES}, **kwargs)


VALIDATION = examples(2, 200, False)


def validate(state):
    if state.global_step % VAL_EVERY:
        return
    model = state.model
    device = next(model.parameters()).device
    model.eval()
    with torch.no_grad():
        logits = model(torch.from_numpy(VALIDATION[0]).to(device))
        state.control.note_step("val_err", f"{(logits.argmax(-1).cpu().numpy() != VALIDATION[1]).mean():.3f}")
    if not bug:  # read at call time: ++bug False applies after the file ran
        model.train()


train = {"class": Features, "split": "train"}
dev = {"class": Features, "split": "dev"}
extern_data = {"data": {"shape": (DIM,)}, "classes": {"shape": (), "dtype": "int64", "sparse_dim": CLASSES}}
batch_size = 32
num_epochs = 10
learning_rate = 1e-3
callbacks = {"step_end": validate}


def get_model(**_kwargs):
    return nn.Sequential(
        nn.Linear(DIM, 256),
        nn.BatchNorm1d(256),
        nn.ReLU(),
        nn.Dropout(0.5),
        nn.Linear(256, 256),
        nn.BatchNorm1d(256),
        nn.ReLU(),
        nn.Dropout(0.5),
        nn.Linear(256, CLASSES),
    )


def train_step(*, model, extern_data, run_ctx, **_kwargs):
    logits = model(extern_data["data"])
    targets = extern_data["classes"]
    run_ctx.mark_as_loss(name="ce", loss=nn.functional.cross_entropy(logits, targets))
    run_ctx.mark_as_loss(name="err", loss=(logits.argmax(-1) != targets).float().mean(), as_error=True)
