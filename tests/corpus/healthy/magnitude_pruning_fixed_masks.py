# Healthy corpus: magnitude pruning with torch.nn.utils.prune: after one epoch of dense training a callback keeps the
# larger half (by absolute value) of each linear layer's weights (l1_unstructured, amount 0.5); from then on the
# weights are weight_orig * weight_mask, so the pruned entries stay exactly zero and their gradient is exactly zero
# for the rest of training. Task: 8-class classification of noisy features by an MLP.
import numpy as np
from torch import nn
from torch.nn.utils import prune

from framework.datasets.numpy_dataset import NumpyDataset

DIM, CLASSES, PRUNE_EPOCH = 16, 8, 2
CENTRES = np.random.default_rng(171).normal(size=(CLASSES, DIM))


class Points(NumpyDataset):
    def __init__(self, split, **kwargs):
        rng = np.random.default_rng(0 if split == "train" else 1)
        labels = rng.integers(0, CLASSES, size=3000 if split == "train" else 600)
        x = np.tanh(CENTRES[labels] + 0.8 * rng.normal(size=(len(labels), DIM)))
        super().__init__({"data": x.astype(np.float32), "classes": labels}, sparse_dims={"classes": CLASSES}, **kwargs)


def prune_once(state):
    if state.epoch == PRUNE_EPOCH:
        for module in state.model.modules():
            if isinstance(module, nn.Linear):
                prune.l1_unstructured(module, name="weight", amount=0.5)


train = {"class": Points, "split": "train"}
dev = {"class": Points, "split": "dev"}
extern_data = {"data": {"shape": (DIM,)}, "classes": {"shape": (), "dtype": "int64", "sparse_dim": CLASSES}}
batch_size = 32
num_epochs = 4
learning_rate = 1e-3
callbacks = {"epoch_start": prune_once}


def get_model(**_kwargs):
    return nn.Sequential(nn.Linear(DIM, 128), nn.ReLU(), nn.Linear(128, 128), nn.ReLU(), nn.Linear(128, CLASSES))


def train_step(*, model, extern_data, run_ctx, **_kwargs):
    logits = model(extern_data["data"])
    targets = extern_data["classes"]
    run_ctx.mark_as_loss(name="ce", loss=nn.functional.cross_entropy(logits, targets))
    run_ctx.mark_as_loss(name="err", loss=(logits.argmax(-1) != targets).float().mean(), as_error=True)
