# Corpus bug (tianweiy/CausVid#19): the pretrained generator was cast to bfloat16 with model.to(dtype=torch.bfloat16)
# and fine-tuned that way instead of with mixed precision over float32 weights; bfloat16 keeps 8 bits of mantissa, so
# an update smaller than about 1/512 of a weight rounds back to the old value, most steps were lost and the model 'was
# unable to converge' where the mixed-precision run trained. Task: a backbone pretrained (inside get_model, in float32)
# on a 10-kind source task is fine-tuned with a new head on a 5-class target task over the same inputs, all parameters
# by Adam at the small rate of fine-tuning (1e-4); the model casts its input to its own dtype, and the loss is taken
# in float32. Twin: ++bug False (the model stays in float32).
import numpy as np
import torch
from torch import nn

from framework.datasets.numpy_dataset import NumpyDataset

bug = True
DIM, SOURCE_CLASSES, CLASSES = 20, 10, 5
PROTOTYPES = np.random.default_rng(71).normal(size=(SOURCE_CLASSES, DIM))
MIX = np.random.default_rng(72).normal(size=(DIM, DIM)) / np.sqrt(DIM)


def inputs(rng, kinds):
    return np.tanh((PROTOTYPES[kinds] + 0.8 * rng.normal(size=(len(kinds), DIM))) @ MIX).astype(np.float32)


class Target(NumpyDataset):
    """The target task groups the source's 10 kinds into 5 classes."""

    def __init__(self, split, **kwargs):
        rng = np.random.default_rng(0 if split == "train" else 1)
        kinds = rng.integers(0, SOURCE_CLASSES, size=1200 if split == "train" else 600)
        arrays = {"data": inputs(rng, kinds), "classes": (kinds * 3 + 1) % SOURCE_CLASSES % CLASSES}
        super().__init__(arrays, sparse_dims={"classes": CLASSES}, **kwargs)


class Classifier(nn.Module):
    def __init__(self, classes):
        super().__init__()
        self.backbone = nn.Sequential(nn.Linear(DIM, 128), nn.ReLU(), nn.Linear(128, 64), nn.ReLU())
        self.head = nn.Linear(64, classes)

    def forward(self, x):
        return self.head(self.backbone(x.to(self.head.weight.dtype)))


def pretrained_backbone():
    outer = torch.random.get_rng_state()  # the pretraining is fixed; the run's own seed is kept for the rest
    torch.manual_seed(7)
    rng = np.random.default_rng(7)
    source = Classifier(SOURCE_CLASSES)
    opt = torch.optim.Adam(source.parameters(), lr=3e-3)
    for _ in range(300):
        kinds = rng.integers(0, SOURCE_CLASSES, size=128)
        loss = nn.functional.cross_entropy(source(torch.from_numpy(inputs(rng, kinds))), torch.from_numpy(kinds))
        opt.zero_grad()
        loss.backward()
        opt.step()
    torch.random.set_rng_state(outer)
    return source.backbone


def get_model(**_kwargs):
    model = Classifier(CLASSES)
    model.backbone = pretrained_backbone()
    if bug:  # read at call time: ++bug False applies after the file ran
        model = model.to(dtype=torch.bfloat16)
    return model


train = {"class": Target, "split": "train"}
dev = {"class": Target, "split": "dev"}
extern_data = {"data": {"shape": (DIM,)}, "classes": {"shape": (), "dtype": "int64", "sparse_dim": CLASSES}}
batch_size = 16
num_epochs = 6
learning_rate = 1e-4


def train_step(*, model, extern_data, run_ctx, **_kwargs):
    logits = model(extern_data["data"]).float()
    targets = extern_data["classes"]
    run_ctx.mark_as_loss(name="ce", loss=nn.functional.cross_entropy(logits, targets))
    run_ctx.mark_as_loss(name="err", loss=(logits.argmax(-1) != targets).float().mean(), as_error=True)
