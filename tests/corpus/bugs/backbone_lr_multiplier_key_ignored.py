# Corpus bug (msight-tech/research-ms-loss#27): build_optimizer puts each parameter in its own group with an
# 'lr_mul' entry (0.1 for the pretrained backbone, 1.0 for the new head), but torch.optim knows no 'lr_mul' and
# nothing reads it, so the backbone is fine-tuned at the full rate like the fresh head. Here the optimizer's groups
# are built the same way; the framework's schedule sets each group's rate from its 'lr_multiplier' (the key this
# framework reads), so a group that spells it 'lr_mul' gets the full rate, as in the report. Task: the backbone (an
# MLP) is pretrained inside get_model on plenty of data of a source task with the same features, then fine-tuned
# with a new head on 300 target examples with 25% noisy labels (SGD, momentum 0.9, rate 0.05, 15 epochs). Twin:
# ++bug False (the backbone's groups carry lr_multiplier 0.1).
import numpy as np
import torch
from torch import nn

from framework.datasets.numpy_dataset import NumpyDataset

bug = True
DIM, SOURCE_CLASSES, CLASSES = 20, 10, 5
PROTOTYPES = np.random.default_rng(12).normal(size=(SOURCE_CLASSES, DIM))
BACKBONE: set[int] = set()


def inputs(rng, labels):
    return np.tanh(PROTOTYPES[labels] + 0.8 * rng.normal(size=(len(labels), DIM))).astype(np.float32)


class Target(NumpyDataset):
    """The target task groups the source's 10 kinds into 5 classes; training labels are 25% noisy."""

    def __init__(self, split, **kwargs):
        rng = np.random.default_rng(0 if split == "train" else 1)
        kinds = rng.integers(0, SOURCE_CLASSES, size=300 if split == "train" else 500)
        labels = kinds % CLASSES
        if split == "train":
            noisy = rng.random(len(labels)) < 0.25
            labels = np.where(noisy, rng.integers(0, CLASSES, size=len(labels)), labels)
        super().__init__({"data": inputs(rng, kinds), "classes": labels}, sparse_dims={"classes": CLASSES}, **kwargs)


def pretrained_backbone():
    torch.manual_seed(5)
    rng = np.random.default_rng(5)
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


def build_optimizer(params, lr, **kwargs):
    groups = []
    for p in params:
        multiplier = 0.1 if id(p) in BACKBONE else 1.0
        if bug:
            groups.append({"params": [p], "lr_mul": multiplier})  # torch.optim ignores the key: the group runs at lr
        else:
            groups.append({"params": [p], "lr_multiplier": multiplier, "lr": lr * multiplier})
    return torch.optim.SGD(groups, lr=lr, **kwargs)


train = {"class": Target, "split": "train"}
dev = {"class": Target, "split": "dev"}
extern_data = {"data": {"shape": (DIM,)}, "classes": {"shape": (), "dtype": "int64", "sparse_dim": CLASSES}}
batch_size = 16
num_epochs = 15
learning_rate = 0.05
optimizer = {"class": build_optimizer, "momentum": 0.9}


def get_model(**_kwargs):
    model = FineTune()
    BACKBONE.clear()
    BACKBONE.update(id(p) for p in model.backbone.parameters())
    return model


def train_step(*, model, extern_data, run_ctx, **_kwargs):
    logits = model(extern_data["data"])
    targets = extern_data["classes"]
    run_ctx.mark_as_loss(name="ce", loss=nn.functional.cross_entropy(logits, targets))
    run_ctx.mark_as_loss(name="err", loss=(logits.argmax(-1) != targets).float().mean(), as_error=True)
