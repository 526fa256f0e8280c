# Corpus bug (xavysp/DexiNed#98): the dataset kept its items as data_index = [images, labels] and __len__ returned
# len(self.data_index), which is always 2, so only the first two examples were ever read; the rest of the folder was
# silently skipped. Here the training set is a dataset class of that shape (its item list holds the inputs and the
# labels) whose num_seqs counts the outer list; the dev set is read by another class, as DexiNed's train and test
# sets are. Task: 10-class classification of noisy, nonlinearly mixed 16-d features by an MLP. Twin: ++bug False
# (num_seqs counts the examples, len(self.data_index[0])).
import numpy as np
from torch import nn

from framework.datasets.base import Dataset
from framework.datasets.numpy_dataset import NumpyDataset

bug = True
DIM, CLASSES = 16, 10
CENTRES = np.random.default_rng(41).normal(size=(CLASSES, DIM))
MIX = np.random.default_rng(42).normal(size=(DIM, DIM)) / np.sqrt(DIM)


def examples(seed, n):
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, CLASSES, size=n)
    x = np.tanh((CENTRES[labels] + 0.9 * rng.normal(size=(n, DIM))) @ MIX).astype(np.float32)
    return x, labels


class PairFolder(Dataset):
    """Training pairs (input, label) listed as data_index = [inputs, labels]."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.data_index = list(examples(0, 2400))

    @property
    def num_seqs(self):
        if bug:  # read at call time: ++bug False applies after the file ran
            return len(self.data_index)  # the outer list: always 2
        return len(self.data_index[0])

    def key_info(self):
        return {
            "data": {"shape": (DIM,), "dtype": "float32"},
            "classes": {"shape": (), "dtype": "int64", "sparse_dim": CLASSES},
        }

    def get_seq(self, index):
        return {"data": self.data_index[0][index], "classes": np.array(self.data_index[1][index])}


class TestList(NumpyDataset):
    def __init__(self, **kwargs):
        x, labels = examples(1, 600)
        super().__init__({"data": x, "classes": labels}, sparse_dims={"classes": CLASSES}, **kwargs)


train = {"class": PairFolder}
dev = {"class": TestList}
extern_data = {"data": {"shape": (DIM,)}, "classes": {"shape": (), "dtype": "int64", "sparse_dim": CLASSES}}
batch_size = 32
num_epochs = 4
learning_rate = 1e-3


def get_model(**_kwargs):
    return nn.Sequential(nn.Linear(DIM, 128), nn.ReLU(), nn.Linear(128, 128), nn.ReLU(), nn.Linear(128, CLASSES))


def train_step(*, model, extern_data, run_ctx, **_kwargs):
    logits = model(extern_data["data"])
    targets = extern_data["classes"]
    run_ctx.mark_as_loss(name="ce", loss=nn.functional.cross_entropy(logits, targets))
    run_ctx.mark_as_loss(name="err", loss=(logits.argmax(-1) != targets).float().mean(), as_error=True)
