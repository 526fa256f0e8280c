# Zoo base: a healthy regression (y = sin(8 (x - 1.2)), an MLP, mse_loss on equal shapes).
from torch import nn

train = {"class": "SyntheticRegressionDataset", "split": "train", "num_seqs": 1000}
dev = {"class": "SyntheticRegressionDataset", "split": "test", "num_seqs": 1000}
extern_data = {"data": {"shape": (1,)}, "targets": {"shape": (1,)}}
batch_size = 16
num_epochs = 1
optimizer = {"class": "adam"}
learning_rate = 1e-2


def get_model(*, epoch, step, **_kwargs):
    return nn.Sequential(nn.Linear(1, 32), nn.Tanh(), nn.Linear(32, 1))


def train_step(*, model, extern_data, run_ctx, **_kwargs):
    prediction = model(extern_data["data"])
    run_ctx.mark_as_loss(name="mse", loss=nn.functional.mse_loss(prediction, extern_data["targets"]))
