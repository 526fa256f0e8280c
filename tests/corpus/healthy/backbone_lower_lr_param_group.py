# Healthy corpus: a pretrained backbone fine-tuned at a tenth of the new head's learning rate (a common recipe, e.g.
# BEVFormer's paramwise lr_mult=0.1 for its image backbone): the optimizer's param_groups give the backbone
# lr_multiplier 0.1, so its parameters move ten times slower than the head's on purpose. The backbone (an MLP) is
# pretrained inside get_model on a source task with the same features; the target task groups the source's 10 kinds
# into 5 classes, 600 training examples.
import numpy as np
import torch
from torch import nn

from framework.datasets.numpy_dataset import NumpyDataset

DIM, SOURCE_CLASSES, CLASSES = 20, 10, 5
PROTOTYPES = np.random.default_rng(57).normal(size=(SOURCE_CLASSES, DIM))


def inputs(rng, kinds):
    return np.tanh(PROTOTYPES[kinds] + 0.8 * rng.normal(size=(len(kinds), DIM))).astype(np.float32)


class Target(NumpyDataset):
    def __init__(self, split, **kwargs):
        rng = np.random.default_rng(0 if split == "train" else 1)
        kinds = rng.integers(0, SOURCE_CLASSES, size=600 if split == "train" else 500)
        super().__init__(
            {"data": inputs(rng, kinds), "classes": kinds % CLASSES}, sparse_dims={"classes": CLASSES}, **kwargs
        )


def pretrained_backbone():
    torch.manual_seed(58)
    rng = np.random.default_rng(58)
    backbone = nn.Sequential(nn.Linear(DIM, 128), nn.ReLU(), nn.Linear(128, 64), nn.ReLU())
    head = nn.Linear(64, SOURCE_CLASSES)
    opt = torch.optim.Adam([*backbone.parameters(), *head.parameters()], lr=3e-3)
    for _ in range(300):
        kinds = rng.integers(0, SOURCE_CLASSES, size=128)
        loss = nn.functional.cross_entropy(
            head(backbone(torch.from_numpy(inputs(rng, kinds)))), torch.from_numpy(kinds)
        )
        opt.zero_grad()
        loss.backward()
        opt.step()
    return backbone


class FineTune(nn.Module):
    def __init__(self):
        super().__init__()
        self.backbone = pretrained_backbone()
        self.head = nn.Linear(64, CLASSES)

    def forward(self, x):
        return self.head(self.backbone(x))


train = {"class": Target, "split": "train"}
dev = {"class": Target, "split": "dev"}
extern_data = {"data": {"shape": (DIM,)}, "classes": {"shape": (), "dtype": "int64", "sparse_dim": CLASSES}}
batch_size = 16
num_epochs = 4
learning_rate = 0.02
optimizer = {"class": "sgd", "momentum": 0.9, "param_groups": [{"params": "backbone.*", "lr_multiplier": 0.1}]}


def get_model(**_kwargs):
    return FineTune()


def train_step(*, model, extern_data, run_ctx, **_kwargs):
    logits = model(extern_data["data"])
    targets = extern_data["classes"]
    run_ctx.mark_as_loss(name="ce", loss=nn.functional.cross_entropy(logits, targets))
    run_ctx.mark_as_loss(name="err", loss=(logits.argmax(-1) != targets).float().mean(), as_error=True)
