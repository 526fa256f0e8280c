# Corpus bug (facebookresearch/detectron2#2486): part of the model was frozen (requires_grad=False) when training
# started and unfrozen later by setting requires_grad=True; detectron2's optimizer builder had left the parameters
# that did not require gradients out of the optimizer, so after unfreezing they got gradients but were never updated,
# and unfreezing 'did not take effect'. Task: fine-tuning in two phases: a backbone pretrained (inside get_model) on
# a source task that does not need input dims 12-19 is frozen for epoch 1, while the new head trains, and unfrozen
# from epoch 2 on; the target classes depend on those dims too. The optimizer is built like detectron2's (trainable
# parameters only); the unfreezing is a callback at the start of epoch 2. Twin: ++bug False (the callback also adds
# the unfrozen parameters to the optimizer as a new param group).
import numpy as np
import torch
from torch import nn

from framework.datasets.numpy_dataset import NumpyDataset

bug = True
DIM, SOURCE_DIMS, CLASSES, UNFREEZE_EPOCH = 20, 12, 6, 2
SOURCE_W = np.random.default_rng(81).normal(size=(SOURCE_DIMS, 8))
TARGET_W = np.random.default_rng(82).normal(size=(DIM, CLASSES))


class Target(NumpyDataset):
    def __init__(self, split, **kwargs):
        rng = np.random.default_rng(0 if split == "train" else 1)
        x = rng.normal(size=(2000 if split == "train" else 600, DIM))
        labels = np.argmax(np.tanh(x) @ TARGET_W, axis=1)
        super().__init__({"data": x.astype(np.float32), "classes": labels}, sparse_dims={"classes": CLASSES}, **kwargs)


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.backbone = nn.Sequential(nn.Linear(DIM, 128), nn.ReLU(), nn.Linear(128, 64), nn.ReLU())
        self.head = nn.Linear(64, CLASSES)

    def forward(self, x):
        return self.head(self.backbone(x))


def pretrain(backbone):
    """A source task over input dims 0-11 only (8 regression targets), so the backbone learns to ignore dims 12-19."""
    outer = torch.random.get_rng_state()  # the pretraining is fixed; the run's own seed is kept for the rest
    torch.manual_seed(8)
    rng = np.random.default_rng(8)
    source_head = nn.Linear(64, 8)
    opt = torch.optim.Adam([*backbone.parameters(), *source_head.parameters()], lr=3e-3)
    for _ in range(400):
        x = rng.normal(size=(128, DIM))
        y = np.tanh(x[:, :SOURCE_DIMS]) @ SOURCE_W
        loss = nn.functional.mse_loss(
            source_head(backbone(torch.tensor(x, dtype=torch.float32))), torch.tensor(y, dtype=torch.float32)
        )
        opt.zero_grad()
        loss.backward()
        opt.step()
    torch.random.set_rng_state(outer)


def get_model(**_kwargs):
    model = Model()
    pretrain(model.backbone)
    model.backbone.requires_grad_(False)  # phase 1: only the new head trains
    return model


class TrainableOnlyAdam(torch.optim.Adam):
    """Like detectron2's build_optimizer: parameters that do not require gradients are left out."""

    def __init__(self, params, **kwargs):
        params = list(params)
        if params and isinstance(params[0], dict):
            params = [{**g, "params": [p for p in g["params"] if p.requires_grad]} for g in params]
        else:
            params = [p for p in params if p.requires_grad]
        super().__init__(params, **kwargs)


def unfreeze(state):
    if state.epoch != UNFREEZE_EPOCH:
        return
    backbone = state.model.backbone
    backbone.requires_grad_(True)
    if not bug:  # read at call time: ++bug False applies after the file ran
        known = {id(p) for group in state.optimizer.param_groups for p in group["params"]}
        new = [p for p in backbone.parameters() if id(p) not in known]
        state.optimizer.add_param_group(
            {**{k: v for k, v in state.optimizer.param_groups[0].items() if k != "params"}, "params": new}
        )


train = {"class": Target, "split": "train"}
dev = {"class": Target, "split": "dev"}
extern_data = {"data": {"shape": (DIM,)}, "classes": {"shape": (), "dtype": "int64", "sparse_dim": CLASSES}}
batch_size = 32
num_epochs = 5
learning_rate = 1e-3
optimizer = {"class": TrainableOnlyAdam}
callbacks = {"epoch_start": unfreeze}


def train_step(*, model, extern_data, run_ctx, **_kwargs):
    logits = model(extern_data["data"])
    targets = extern_data["classes"]
    run_ctx.mark_as_loss(name="ce", loss=nn.functional.cross_entropy(logits, targets))
    run_ctx.mark_as_loss(name="err", loss=(logits.argmax(-1) != targets).float().mean(), as_error=True)
