# Corpus bug (tensorflow/models#6641): the dataset conversion tool stores each example's class index as np.uint8;
# with a label map of more than 256 classes (Open Images) every index above 255 wraps around modulo 256 and trains as
# an unrelated low class, while the evaluation reads the ground truth from the original annotations. Task: 300
# classes, each a prototype in a 32-dim embedding space plus noise (the region features of a detector), a linear
# classifier on top of a small MLP; the training set is written by the conversion tool, the dev set's labels come
# from the annotation table. Twin: ++bug False (the tool stores int64).
import numpy as np
from torch import nn

from framework.datasets.numpy_dataset import NumpyDataset

bug = True
CLASSES, DIM = 300, 32


def convert_labels(label_ids):
    """The conversion tool: class indices as written to the training records."""
    return np.asarray(label_ids, dtype=np.uint8 if bug else np.int64).astype(np.int64)


class RegionFeatures(NumpyDataset):
    def __init__(self, split, **kwargs):
        rng = np.random.default_rng(0 if split == "train" else 1)
        prototypes = np.random.default_rng(3).normal(size=(CLASSES, DIM))
        n = 30 * CLASSES if split == "train" else 6 * CLASSES
        labels = rng.integers(0, CLASSES, size=n)
        x = prototypes[labels] + 0.6 * rng.normal(size=(n, DIM))
        if split == "train":
            labels = convert_labels(labels)
        super().__init__({"data": x.astype(np.float32), "classes": labels}, sparse_dims={"classes": CLASSES}, **kwargs)


train = {"class": RegionFeatures, "split": "train"}
dev = {"class": RegionFeatures, "split": "dev"}
extern_data = {"data": {"shape": (DIM,)}, "classes": {"shape": (), "dtype": "int64", "sparse_dim": CLASSES}}
batch_size = 128
num_epochs = 4
learning_rate = 3e-3


def get_model(**_kwargs):
    return nn.Sequential(nn.Linear(DIM, 256), nn.ReLU(), nn.Linear(256, CLASSES))


def train_step(*, model, extern_data, run_ctx, **_kwargs):
    logits = model(extern_data["data"])
    targets = extern_data["classes"]
    run_ctx.mark_as_loss(name="ce", loss=nn.functional.cross_entropy(logits, targets))
    run_ctx.mark_as_loss(name="err", loss=(logits.argmax(-1) != targets).float().mean(), as_error=True)
