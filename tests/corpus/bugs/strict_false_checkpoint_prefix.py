# Corpus bug (pytorch/examples#1029): a model trained inside a Lightning module was saved with every key prefixed by
# 'model.'; loading it into the bare model with load_state_dict(state_dict, strict=False) matched none of the keys and
# loaded nothing, without an error, so the "pretrained" model kept its random weights. Task: a backbone is pretrained
# (inside get_model, as a LightningModule-like wrapper whose attribute is 'model') on plenty of data of a 10-kind
# source task, saved through a buffer like a checkpoint file, and loaded into the classifier that is then fine-tuned
# on 150 examples of a 5-class target task over the same inputs. Twin: ++bug False (the prefix is stripped and the
# backbone's keys are loaded with strict=True).
import io

import numpy as np
import torch
from torch import nn

from framework.datasets.numpy_dataset import NumpyDataset

bug = True
DIM, SOURCE_CLASSES, CLASSES = 20, 10, 5
PROTOTYPES = np.random.default_rng(21).normal(size=(SOURCE_CLASSES, DIM))
MIX = np.random.default_rng(22).normal(size=(DIM, DIM)) / np.sqrt(DIM)


def inputs(rng, kinds):
    return np.tanh((PROTOTYPES[kinds] + 0.8 * rng.normal(size=(len(kinds), DIM))) @ MIX).astype(np.float32)


class Target(NumpyDataset):
    """The target task groups the source's 10 kinds into 5 classes, with few training examples."""

    def __init__(self, split, **kwargs):
        rng = np.random.default_rng(0 if split == "train" else 1)
        kinds = rng.integers(0, SOURCE_CLASSES, size=150 if split == "train" else 600)
        super().__init__(
            {"data": inputs(rng, kinds), "classes": kinds % CLASSES}, sparse_dims={"classes": CLASSES}, **kwargs
        )


def backbone():
    return nn.Sequential(nn.Linear(DIM, 128), nn.ReLU(), nn.Linear(128, 64), nn.ReLU())


class Classifier(nn.Module):
    def __init__(self, classes):
        super().__init__()
        self.backbone = backbone()
        self.head = nn.Linear(64, classes)

    def forward(self, x):
        return self.head(self.backbone(x))


class LitModule(nn.Module):
    """The training wrapper of the pretraining run: the network is its attribute 'model'."""

    def __init__(self):
        super().__init__()
        self.model = Classifier(SOURCE_CLASSES)


def pretrained_checkpoint():
    outer = torch.random.get_rng_state()  # the pretraining is fixed; the run's own seed is kept for the rest
    torch.manual_seed(5)
    rng = np.random.default_rng(5)
    lit = LitModule()
    opt = torch.optim.Adam(lit.parameters(), lr=3e-3)
    for _ in range(300):
        kinds = rng.integers(0, SOURCE_CLASSES, size=128)
        loss = nn.functional.cross_entropy(lit.model(torch.from_numpy(inputs(rng, kinds))), torch.from_numpy(kinds))
        opt.zero_grad()
        loss.backward()
        opt.step()
    torch.random.set_rng_state(outer)
    buffer = io.BytesIO()
    torch.save(lit.state_dict(), buffer)  # keys 'model.backbone.0.weight', ..., 'model.head.bias'
    buffer.seek(0)
    return torch.load(buffer, weights_only=True)


def get_model(**_kwargs):
    state = pretrained_checkpoint()
    model = Classifier(CLASSES)
    if bug:  # read at call time: ++bug False applies after the file ran
        model.load_state_dict(state, strict=False)  # no key matches: nothing is loaded
    else:
        prefix = "model.backbone."
        model.backbone.load_state_dict({k[len(prefix) :]: v for k, v in state.items() if k.startswith(prefix)})
    return model


train = {"class": Target, "split": "train"}
dev = {"class": Target, "split": "dev"}
extern_data = {"data": {"shape": (DIM,)}, "classes": {"shape": (), "dtype": "int64", "sparse_dim": CLASSES}}
batch_size = 16
num_epochs = 6
learning_rate = 1e-3


def train_step(*, model, extern_data, run_ctx, **_kwargs):
    logits = model(extern_data["data"])
    targets = extern_data["classes"]
    run_ctx.mark_as_loss(name="ce", loss=nn.functional.cross_entropy(logits, targets))
    run_ctx.mark_as_loss(name="err", loss=(logits.argmax(-1) != targets).float().mean(), as_error=True)
