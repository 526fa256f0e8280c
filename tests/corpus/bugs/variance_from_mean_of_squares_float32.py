# Corpus bug (k2-fsa/sherpa-onnx#3857): NemoNormalizePerFeature normalised each feature of an utterance by its mean
# and standard deviation over the frames, with the variance computed as E[x^2] - E[x]^2 in float32. A mel bin at the
# log floor (about -15.94) with a few frames slightly off it has both terms near 254 and a true difference below
# float32's resolution there, so the variance cancelled to 0, 1 / (std + 1e-5) became 1e5 and the bin's tiny
# deviations came out near +7500 while every other feature stayed within +-17. Task: 4 classes of log-mel-like
# utterances (40 frames x 24 bins): in the 16 low bins a formant-like bump moves along a class-specific track over
# the frames (rising, falling, low, high), with frame noise and a random gain; the 8 high bins sit at the log floor
# with a few frames a little off it (quantisation noise).
# Per-utterance, per-feature normalisation (NeMo's normalize='per_feature', std + 1e-5) inside the model, in float32,
# then a small 2-d CNN over (frames, bins) with global mean pooling. Twin: ++bug False (the variance of the centred
# values).
import numpy as np
from torch import nn

from framework.datasets.numpy_dataset import NumpyDataset

bug = True
FRAMES, BINS, LOW, CLASSES, FLOOR = 40, 24, 16, 4, float(np.log(1.2e-7))  # FLOOR = -15.94
TRACKS = np.array([np.linspace(2, 13, FRAMES), np.linspace(13, 2, FRAMES), np.full(FRAMES, 4.0), np.full(FRAMES, 11.0)])
TEMPLATES = 3.0 * np.exp(
    -0.5 * ((np.arange(LOW)[None, None, :] - TRACKS[:, :, None]) / 1.5) ** 2
)  # [class, frame, bin]


def utterances(seed, n):
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, CLASSES, size=n)
    x = np.full((n, FRAMES, BINS), FLOOR)
    gain = rng.normal(0.0, 2.0, size=(n, 1, 1))
    x[:, :, :LOW] = -4.0 + gain + TEMPLATES[labels] + rng.normal(0.0, 1.0, size=(n, FRAMES, LOW))
    off_floor = rng.random((n, FRAMES, BINS - LOW)) < 0.05
    x[:, :, LOW:] += off_floor * rng.uniform(1e-3, 2e-2, size=(n, FRAMES, BINS - LOW))
    return x.astype(np.float32), labels


class LogMel(NumpyDataset):
    def __init__(self, split, **kwargs):
        x, labels = utterances(0 if split == "train" else 1, 1200 if split == "train" else 400)
        super().__init__({"data": x, "classes": labels}, sparse_dims={"classes": CLASSES}, **kwargs)


train = {"class": LogMel, "split": "train"}
dev = {"class": LogMel, "split": "dev"}
extern_data = {"data": {"shape": (FRAMES, BINS)}, "classes": {"shape": (), "dtype": "int64", "sparse_dim": CLASSES}}
batch_size = 32
num_epochs = 6
learning_rate = 2e-3


def normalize_per_feature(x):
    """NeMo's per_feature normalisation over the frames of each utterance: (x - mean) / (std + 1e-5)."""
    mean = x.mean(dim=1, keepdim=True)
    if bug:
        var = ((x * x).mean(dim=1, keepdim=True) - mean * mean).clamp(min=0.0)  # E[x^2] - E[x]^2
    else:
        var = ((x - mean) ** 2).mean(dim=1, keepdim=True)
    return (x - mean) / (var.sqrt() + 1e-5)


class SpectrogramCNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.convs = nn.Sequential(
            nn.Conv2d(1, 16, 3, padding=1), nn.ReLU(), nn.Conv2d(16, 32, 3, padding=1), nn.ReLU()
        )
        self.out = nn.Linear(32, CLASSES)

    def forward(self, features):  # [B, frames, bins]
        hidden = self.convs(normalize_per_feature(features)[:, None])  # [B, 32, frames, bins]
        return self.out(hidden.mean(dim=(2, 3)))


def get_model(**_kwargs):
    return SpectrogramCNN()


def train_step(*, model, extern_data, run_ctx, **_kwargs):
    logits = model(extern_data["data"])
    targets = extern_data["classes"]
    run_ctx.mark_as_loss(name="ce", loss=nn.functional.cross_entropy(logits, targets))
    run_ctx.mark_as_loss(name="err", loss=(logits.argmax(-1) != targets).float().mean(), as_error=True)
