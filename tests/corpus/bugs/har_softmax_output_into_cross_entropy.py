# Corpus bug (jindongwang/Deep-learning-activity-recognition#10): the activity-recognition CNN ends in F.softmax and
# its output goes to nn.CrossEntropyLoss, which applies log-softmax itself, so the loss treats probabilities in [0, 1]
# as logits: it cannot fall far, and its gradient fades for examples the model is confident about, right or wrong.
# Task: windows of 64 samples of a 3-axis accelerometer (UCI-HAR-like), 6 activities that differ in the frequency and
# amplitude of the motion on each axis, with sensor noise; the repository's CNN in small (two convolution/pooling
# stages, two dense layers). Twin: ++bug False (the raw outputs go to CrossEntropyLoss).
import numpy as np
from torch import nn

from framework.datasets.numpy_dataset import NumpyDataset

bug = True
SAMPLES, AXES, ACTIVITIES = 64, 3, 6
PROFILE = np.random.default_rng(3)


FREQ = PROFILE.uniform(1.0, 4.0, size=(ACTIVITIES, AXES))
AMPLITUDE = PROFILE.uniform(0.3, 1.0, size=(ACTIVITIES, AXES))


class Windows(NumpyDataset):
    def __init__(self, split, **kwargs):
        rng = np.random.default_rng(0 if split == "train" else 1)
        n = 2400 if split == "train" else 600
        labels = rng.integers(0, ACTIVITIES, size=n)
        t = np.linspace(0, 2 * np.pi, SAMPLES)[None, None, :]
        freq = FREQ[labels][:, :, None] * rng.uniform(0.85, 1.15, size=(n, AXES, 1))
        amplitude = AMPLITUDE[labels][:, :, None] * rng.uniform(0.8, 1.2, size=(n, AXES, 1))
        phase = rng.uniform(0, 2 * np.pi, size=(n, AXES, 1))
        x = amplitude * np.sin(freq * t + phase) + 0.4 * rng.normal(size=(n, AXES, SAMPLES))
        super().__init__(
            {"data": x.astype(np.float32), "classes": labels}, sparse_dims={"classes": ACTIVITIES}, **kwargs
        )


train = {"class": Windows, "split": "train"}
dev = {"class": Windows, "split": "dev"}
extern_data = {
    "data": {"shape": (AXES, SAMPLES)},
    "classes": {"shape": (), "dtype": "int64", "sparse_dim": ACTIVITIES},
}
batch_size = 32
num_epochs = 5
learning_rate = 1e-3


class Network(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Sequential(
            nn.Conv1d(AXES, 16, 9), nn.ReLU(), nn.MaxPool1d(2), nn.Conv1d(16, 32, 9), nn.ReLU(), nn.MaxPool1d(2)
        )
        self.fc = nn.Sequential(nn.Flatten(), nn.Linear(32 * 10, 128), nn.ReLU(), nn.Linear(128, ACTIVITIES))

    def forward(self, x):
        out = self.fc(self.conv(x))
        if bug:
            out = nn.functional.softmax(out, dim=1)
        return out


def get_model(**_kwargs):
    return Network()


def train_step(*, model, extern_data, run_ctx, **_kwargs):
    output = model(extern_data["data"])
    targets = extern_data["classes"]
    run_ctx.mark_as_loss(name="ce", loss=nn.CrossEntropyLoss()(output, targets))
    run_ctx.mark_as_loss(name="err", loss=(output.argmax(-1) != targets).float().mean(), as_error=True)
