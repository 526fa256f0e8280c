# Healthy corpus: stochastic weight averaging (torch.optim.swa_utils): from the third sub-epoch on, an AveragedModel
# of a BatchNorm MLP is updated after each sub-epoch, and torch.optim.swa_utils.update_bn runs the averaged model over
# training batches in train mode only to recompute its BatchNorm statistics (its outputs are discarded); dev is
# evaluated with the averaged model once it exists. Task: 5 classes of 30-dim inputs with a nonlinear boundary.
import numpy as np
import torch
from torch import nn
from torch.optim.swa_utils import AveragedModel, update_bn

from framework.datasets.numpy_dataset import NumpyDataset

DIM, CLASSES, SWA_START = 30, 5, 3


def make(rng, n):
    x = rng.normal(size=(n, DIM))
    w = np.random.default_rng(13).normal(size=(DIM, CLASSES))
    labels = (np.tanh(x @ w) + 0.1 * rng.normal(size=(n, CLASSES))).argmax(1)
    return x.astype(np.float32), labels


class Inputs(NumpyDataset):
    def __init__(self, split, **kwargs):
        rng = np.random.default_rng(0 if split == "train" else 1)
        x, labels = make(rng, 4000 if split == "train" else 800)
        super().__init__({"data": x, "classes": labels}, sparse_dims={"classes": CLASSES}, **kwargs)


_train_x = torch.tensor(make(np.random.default_rng(0), 4000)[0])  # the loader update_bn reads

train = {"class": Inputs, "split": "train", "partition_epoch": 2}
dev = {"class": Inputs, "split": "dev"}
extern_data = {"data": {"shape": (DIM,)}, "classes": {"shape": (), "dtype": "int64", "sparse_dim": CLASSES}}
batch_size = 64
num_epochs = 6
learning_rate = 1e-3


class SWANet(nn.Module):
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
        self.swa = None  # the AveragedModel, kept out of the optimizer's parameters

    def forward(self, x):
        return self.net(x)


def get_model(**_kwargs):
    return SWANet()


def epoch_end(*, epoch, model, dataset_name, **_kwargs):
    if dataset_name != "train" or epoch < SWA_START:
        return
    if model.swa is None:
        object.__setattr__(model, "swa", AveragedModel(model.net))  # not a submodule: not trained, not saved twice
    model.swa.update_parameters(model.net)
    loader = [_train_x[i : i + 256].to(next(model.net.parameters()).device) for i in range(0, len(_train_x), 256)]
    update_bn(loader, model.swa)  # a forward pass in train mode for the BatchNorm statistics; outputs discarded


def train_step(*, model, extern_data, run_ctx, **_kwargs):
    x, targets = extern_data["data"], extern_data["classes"]
    if run_ctx.train_flag or model.swa is None:
        logits = model(x)
    else:
        with torch.no_grad():
            logits = model.swa(x)
    run_ctx.mark_as_loss(name="ce", loss=nn.functional.cross_entropy(logits, targets))
    run_ctx.mark_as_loss(name="err", loss=(logits.argmax(-1) != targets).float().mean(), as_error=True)
