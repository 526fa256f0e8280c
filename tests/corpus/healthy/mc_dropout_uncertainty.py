# Healthy corpus: Monte Carlo dropout for regression. The MLP's dropout is applied with training=True on purpose, so
# it stays active at evaluation too; the dev prediction is the mean of several stochastic passes (and their spread is
# the model's uncertainty). Dropout at evaluation is the intended method here, not a forgotten model.eval().
import numpy as np
import torch
from torch import nn

from framework.datasets.numpy_dataset import NumpyDataset

P_DROP, PASSES = 0.1, 16


class Noisy(NumpyDataset):
    def __init__(self, split, **kwargs):
        rng = np.random.default_rng(0 if split == "train" else 1)
        x = rng.uniform(-2, 2, size=(3000 if split == "train" else 500, 1)).astype(np.float32)
        y = np.sin(2 * x[:, 0]) + 0.1 * rng.normal(size=len(x))
        super().__init__({"data": x, "target": y.astype(np.float32)}, **kwargs)


train = {"class": Noisy, "split": "train"}
dev = {"class": Noisy, "split": "dev"}
extern_data = {"data": {"shape": (1,)}, "target": {"shape": (), "dtype": "float32"}}
batch_size = 32
num_epochs = 2
learning_rate = 3e-3


class McDropoutMlp(nn.Module):
    def __init__(self):
        super().__init__()
        self.hidden1, self.hidden2, self.out = nn.Linear(1, 64), nn.Linear(64, 64), nn.Linear(64, 1)

    def forward(self, x):
        # training=True on purpose (Monte Carlo dropout): every pass samples a new sub-network, also at evaluation.
        h = nn.functional.dropout(torch.relu(self.hidden1(x)), P_DROP, training=True)
        h = nn.functional.dropout(torch.relu(self.hidden2(h)), P_DROP, training=True)
        return self.out(h).squeeze(-1)


def get_model(**_kwargs):
    return McDropoutMlp()


def train_step(*, model, extern_data, run_ctx, **_kwargs):
    x, target = extern_data["data"], extern_data["target"]
    samples = torch.stack([model(x) for _ in range(1 if run_ctx.train_flag else PASSES)])
    prediction = samples.mean(0)
    run_ctx.mark_as_loss(name="mse", loss=nn.functional.mse_loss(prediction, target))
    run_ctx.mark_as_loss(name="err", loss=nn.functional.mse_loss(prediction.detach(), target), as_error=True)
