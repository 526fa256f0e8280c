# Corpus bug (nyu-mll/jiant#345): the LSTM's final (h, c) of one batch is kept and used as the initial state of the
# next batch, though the batches hold unrelated sequences, so every prediction depends on whatever batch ran
# before. Task: the sign of the first frame's first feature of a 6-frame sequence, read from the LSTM's last state.
# Twin: ++bug False (every batch starts from the zero state).
import numpy as np
from torch import nn

from framework.datasets.numpy_dataset import NumpyDataset

bug = True


class Sequences(NumpyDataset):
    def __init__(self, split, **kwargs):
        rng = np.random.default_rng(0 if split == "train" else 1)
        x = rng.normal(size=(6400 if split == "train" else 640, 6, 2)).astype(np.float32)
        y = (x[:, 0, 0] > 0).astype(np.int64)
        super().__init__({"data": x, "classes": y}, sparse_dims={"classes": 2}, **kwargs)


train = {"class": Sequences, "split": "train"}
dev = {"class": Sequences, "split": "dev"}
extern_data = {"data": {"shape": (6, 2)}, "classes": {"shape": (), "dtype": "int64", "sparse_dim": 2}}
batch_size = 32
num_epochs = 3
learning_rate = 3e-3


class StatefulLSTM(nn.Module):
    def __init__(self):
        super().__init__()
        self.lstm = nn.LSTM(2, 32, batch_first=True)
        self.out = nn.Linear(32, 2)
        self.state = None  # (h, c) of the previous batch

    def forward(self, x):
        state = self.state if self.state is not None and self.state[0].shape[1] == x.shape[0] else None
        outputs, state = self.lstm(x, state)
        if bug:
            self.state = (state[0].detach(), state[1].detach())
        return self.out(outputs[:, -1])


def get_model(**_kwargs):
    return StatefulLSTM()


def train_step(*, model, extern_data, run_ctx, **_kwargs):
    logits = model(extern_data["data"])
    targets = extern_data["classes"]
    run_ctx.mark_as_loss(name="ce", loss=nn.functional.cross_entropy(logits, targets))
    run_ctx.mark_as_loss(name="err", loss=(logits.argmax(-1) != targets).float().mean(), as_error=True)
