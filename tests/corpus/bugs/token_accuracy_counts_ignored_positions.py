# Corpus bug (jsbaan/transformer-from-scratch#7): padded targets are -100 so the loss skips them, but the token error
# compares predictions at every position against those -100 targets; the reported dev error is far above the
# model's. Task: tag each frame of a variable-length sequence by its sign. Twin: ++bug False (error over the real
# positions).
import numpy as np
import torch
from torch import nn

from framework.datasets.numpy_dataset import NumpyDataset

bug = True
IGNORE = -100


class Frames(NumpyDataset):
    def __init__(self, split, **kwargs):
        rng = np.random.default_rng(0 if split == "train" else 1)
        lengths = rng.integers(2, 30, size=1500 if split == "train" else 300)
        x = [rng.normal(size=(t, 1)).astype(np.float32) for t in lengths]
        y = [(s[:, 0] > 0).astype(np.int64) for s in x]
        super().__init__({"data": x, "classes": y}, sparse_dims={"classes": 2}, **kwargs)


train = {"class": Frames, "split": "train"}
dev = {"class": Frames, "split": "dev"}
extern_data = {"data": {"shape": (None, 1)}, "classes": {"shape": (None,), "dtype": "int64", "sparse_dim": 2}}
batch_size = 600
max_seqs = 32
num_epochs = 2
learning_rate = 3e-3


def get_model(**_kwargs):
    return nn.Sequential(nn.Linear(1, 16), nn.ReLU(), nn.Linear(16, 2))


def train_step(*, model, extern_data, run_ctx, **_kwargs):
    classes = extern_data["classes"]
    lengths = extern_data["classes:seq_len"].to(classes.device)
    real = torch.arange(classes.shape[1], device=classes.device)[None, :] < lengths[:, None]
    targets = classes.masked_fill(~real, IGNORE)
    logits = model(extern_data["data"])
    loss = nn.functional.cross_entropy(logits.transpose(1, 2), targets, ignore_index=IGNORE)
    run_ctx.mark_as_loss(name="ce", loss=loss)
    wrong = logits.argmax(-1) != targets
    run_ctx.mark_as_loss(name="err", loss=wrong.float().mean() if bug else wrong[real].float().mean(), as_error=True)
