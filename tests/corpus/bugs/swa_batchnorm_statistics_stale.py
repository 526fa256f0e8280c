# Corpus bug (mosaicml/composer#624): with stochastic weight averaging the evaluated model carries the averaged
# weights, but its BatchNorm running statistics were never recomputed for them (the update_bn pass was skipped when
# SWA ended inside the last epoch), so it normalised with statistics of other weights and performed very poorly.
# Task: 6-class classification of raw, unstandardised 20-d features by an MLP with BatchNorm; from epoch 2 on every
# update is averaged into torch.optim.swa_utils.AveragedModel (built with the model), and evaluation runs the averaged
# model. Twin: ++bug False (before each evaluation, update_bn runs the training data through the averaged model).
import numpy as np
import torch
from torch import nn
from torch.optim.swa_utils import AveragedModel, update_bn

from framework.datasets.numpy_dataset import NumpyDataset

bug = True
DIM, CLASSES, SWA_START = 20, 6, 2
CENTRES = np.random.default_rng(61).normal(size=(CLASSES, DIM))


def examples(seed, n):
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, CLASSES, size=n)
    x = 100.0 + 3.0 * (CENTRES[labels] + 1.2 * rng.normal(size=(n, DIM)))
    return x.astype(np.float32), labels


class Features(NumpyDataset):
    def __init__(self, split, **kwargs):
        x, labels = examples(0 if split == "train" else 1, 2000 if split == "train" else 600)
        super().__init__({"data": x, "classes": labels}, sparse_dims={"classes": CLASSES}, **kwargs)


class SWAClassifier(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(
            nn.Linear(DIM, 128),
            nn.BatchNorm1d(128),
            nn.ReLU(),
            nn.Linear(128, 128),
            nn.BatchNorm1d(128),
            nn.ReLU(),
            nn.Linear(128, CLASSES),
        )
        self.swa = AveragedModel(self.net)
        self.swa.requires_grad_(False)

    def forward(self, x):
        return self.net(x) if self.training else self.swa(x)


def average(state):
    if state.epoch >= SWA_START:
        state.model.swa.update_parameters(state.model.net)


def recompute_bn(state):
    if bug:  # read at call time: ++bug False applies after the file ran
        return
    swa = state.model.swa
    device = next(swa.parameters()).device
    x = torch.from_numpy(examples(0, 2000)[0]).to(device)
    update_bn([x[i : i + 64] for i in range(0, len(x), 64)], swa)
    swa.eval()


train = {"class": Features, "split": "train"}
dev = {"class": Features, "split": "dev"}
extern_data = {"data": {"shape": (DIM,)}, "classes": {"shape": (), "dtype": "int64", "sparse_dim": CLASSES}}
batch_size = 32
num_epochs = 5
learning_rate = 3e-3
callbacks = {"after_optimizer_step": average, "eval_start": recompute_bn}


def get_model(**_kwargs):
    return SWAClassifier()


def train_step(*, model, extern_data, run_ctx, **_kwargs):
    logits = model(extern_data["data"])
    targets = extern_data["classes"]
    run_ctx.mark_as_loss(name="ce", loss=nn.functional.cross_entropy(logits, targets))
    run_ctx.mark_as_loss(name="err", loss=(logits.argmax(-1) != targets).float().mean(), as_error=True)
