# Healthy corpus: dense (per-position) classification of noisy 1-D signals into 4 segment classes. The positions next
# to a segment boundary are ambiguous and carry the void label 255 (as in Pascal VOC or Cityscapes): the cross entropy
# skips them with ignore_index=255 and the error counts only the labelled positions, by design.
import numpy as np
from torch import nn

from framework.datasets.numpy_dataset import NumpyDataset

CLASSES, LENGTH, VOID = 4, 64, 255
LEVELS = np.array([-1.5, -0.5, 0.5, 1.5])


class Segments(NumpyDataset):
    def __init__(self, split, **kwargs):
        rng = np.random.default_rng(0 if split == "train" else 1)
        n = 1500 if split == "train" else 300
        starts = rng.random((n, LENGTH)) < 1 / 12
        starts[:, 0] = True
        segment = np.cumsum(starts, axis=1) - 1
        labels = np.take_along_axis(rng.integers(0, CLASSES, (n, LENGTH)), segment, axis=1)
        signal = LEVELS[labels] + 0.8 * rng.normal(size=labels.shape)
        change = labels[:, 1:] != labels[:, :-1]
        boundary = np.zeros(labels.shape, dtype=bool)
        boundary[:, 1:] |= change
        boundary[:, :-1] |= change
        labels[boundary] = VOID
        super().__init__(
            {"data": signal[:, None, :].astype(np.float32), "classes": labels},
            sparse_dims={"classes": CLASSES},
            **kwargs,
        )


train = {"class": Segments, "split": "train"}
dev = {"class": Segments, "split": "dev"}
extern_data = {"data": {"shape": (1, LENGTH)}, "classes": {"shape": (LENGTH,), "dtype": "int64", "sparse_dim": CLASSES}}
batch_size = 32
num_epochs = 2
learning_rate = 3e-3


def get_model(**_kwargs):
    return nn.Sequential(
        nn.Conv1d(1, 32, 5, padding=2),
        nn.ReLU(),
        nn.Conv1d(32, 32, 5, padding=2),
        nn.ReLU(),
        nn.Conv1d(32, CLASSES, 1),
    )


def train_step(*, model, extern_data, run_ctx, **_kwargs):
    logits = model(extern_data["data"])  # [batch, classes, length]
    labels = extern_data["classes"]
    run_ctx.mark_as_loss(name="ce", loss=nn.functional.cross_entropy(logits, labels, ignore_index=VOID))
    labelled = labels != VOID
    wrong = (logits.argmax(1) != labels) & labelled
    run_ctx.mark_as_loss(name="err", loss=wrong.sum() / labelled.sum(), as_error=True)
