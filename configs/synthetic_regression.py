# Synthetic nonlinear regression: y = sin(8 (x - 1.2)) + noise, x ~ U(-1, 1).
#
#   python rnn.py configs/synthetic_regression.py
#   python rnn.py configs/synthetic_regression.py ++split_mode "'gap'"   # test on unseen x range
#
# A model that cannot fit this known, learnable relation has a bug; one that can, but fails on
# your real data, points at the data. With the gap split the dev set holds the outer 20% of the
# x range, so the dev error shows how the model extrapolates (badly, for an MLP).
from torch import nn

from framework import run_output_dir

split_mode = "random"

task = "train"
train = {"class": "SyntheticRegressionDataset", "split": "train", "num_seqs": 2000, "split_mode": split_mode}
dev = {"class": "SyntheticRegressionDataset", "split": "test", "num_seqs": 2000, "split_mode": split_mode}
extern_data = {"data": {"shape": (1,)}, "targets": {"shape": (1,)}}
batch_size = 32
num_epochs = 30
optimizer = {"class": "adam"}
learning_rate = 3e-3
output_dir = run_output_dir()  # output/synthetic_regression
model = output_dir + "/model"
log_verbosity = 4


def get_model(*, epoch, step, **_kwargs):
    return nn.Sequential(nn.Linear(1, 64), nn.Tanh(), nn.Linear(64, 64), nn.Tanh(), nn.Linear(64, 1))


def train_step(*, model, extern_data, run_ctx, **_kwargs):
    prediction = model(extern_data["data"])
    run_ctx.mark_as_loss(name="mse", loss=nn.functional.mse_loss(prediction, extern_data["targets"]))
