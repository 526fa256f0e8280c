# Corpus bug (ProteomicsML/ProteomicsML#203): a regression network ends in a ReLU, so its prediction can never be
# negative; the targets below zero are predicted as 0 at best. Task: y = sin(8 (x - 1.2)) + noise on x in [-1, 1]
# (about half of the targets negative); the error is the dev mean squared error.
# Twin: ++bug False (a linear output layer).
from torch import nn

bug = True

train = {"class": "SyntheticRegressionDataset", "split": "train", "num_seqs": 2000}
dev = {"class": "SyntheticRegressionDataset", "split": "test", "num_seqs": 2000}
extern_data = {"data": {"shape": (1,)}, "targets": {"shape": (1,)}}
batch_size = 32
num_epochs = 20
learning_rate = 3e-3


def get_model(**_kwargs):
    layers = [nn.Linear(1, 64), nn.Tanh(), nn.Linear(64, 64), nn.Tanh(), nn.Linear(64, 1)]
    if bug:
        layers.append(nn.ReLU())
    return nn.Sequential(*layers)


def train_step(*, model, extern_data, run_ctx, **_kwargs):
    prediction = model(extern_data["data"])
    mse = nn.functional.mse_loss(prediction, extern_data["targets"])
    run_ctx.mark_as_loss(name="mse", loss=mse)
    run_ctx.mark_as_loss(name="err", loss=mse.detach(), as_error=True)
