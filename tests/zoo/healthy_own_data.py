# Healthy corpus: the example of docs/own_data.rst: toy utterances written one .npy file each plus labels.txt
# (here into the directory of own_data_directory, by the test), read by a Dataset subclass of the user's, a
# mean-pooling classifier over the real frames. The docs run it 5 epochs; 2 here.
import os

import numpy as np
import torch
from torch import nn

from framework.datasets.base import Dataset

own_data_directory = "output/toy_utterances"


def make_toy_utterances(directory):
    """docs/own_data.rst's make_toy_utterances.py."""
    rng = np.random.default_rng(0)
    os.makedirs(os.path.join(directory, "feats"), exist_ok=True)
    with open(os.path.join(directory, "labels.txt"), "w") as labels:
        for i in range(300):
            label = int(rng.integers(0, 3))
            feats = rng.normal(size=(int(rng.integers(5, 60)), 8)).astype(np.float32)
            feats[:, label] += 0.5
            np.save(os.path.join(directory, "feats", f"utt{i:03d}.npy"), feats)
            labels.write(f"utt{i:03d} {label}\n")


class UtteranceDataset(Dataset):
    def __init__(self, directory, split, **kwargs):
        super().__init__(**kwargs)
        with open(os.path.join(directory, "labels.txt")) as f:
            entries = [line.split() for line in f]
        entries = entries[:250] if split == "train" else entries[250:]
        self.paths = [os.path.join(directory, "feats", name + ".npy") for name, _ in entries]
        self.labels = [int(label) for _, label in entries]

    @property
    def num_seqs(self):
        return len(self.paths)

    def key_info(self):
        return {
            "data": {"shape": (None, 8), "dtype": "float32"},
            "classes": {"shape": (), "dtype": "int64", "sparse_dim": 3},
        }

    def get_seq(self, index):
        return {"data": np.load(self.paths[index]), "classes": np.array(self.labels[index])}

    def seq_lengths(self):
        return np.array([np.load(path, mmap_mode="r").shape[0] for path in self.paths])


make_toy_utterances(own_data_directory)
train = {"class": UtteranceDataset, "directory": own_data_directory, "split": "train"}
dev = {"class": UtteranceDataset, "directory": own_data_directory, "split": "dev"}
extern_data = {
    "data": {"shape": (None, 8), "dtype": "float32"},
    "classes": {"shape": (), "dtype": "int64", "sparse_dim": 3},
}
batch_size = 400
max_seqs = 32
num_epochs = 2
optimizer = {"class": "adam"}
learning_rate = 3e-3


class MeanPoolClassifier(nn.Module):
    def __init__(self):
        super().__init__()
        self.frames = nn.Sequential(nn.Linear(8, 32), nn.ReLU())
        self.out = nn.Linear(32, 3)

    def forward(self, data, seq_len):
        hidden = self.frames(data)
        seq_len = seq_len.to(data.device)
        real = torch.arange(data.shape[1], device=data.device)[None, :] < seq_len[:, None]
        pooled = (hidden * real[..., None]).sum(dim=1) / seq_len[:, None]
        return self.out(pooled)


def get_model(**_kwargs):
    return MeanPoolClassifier()


def train_step(*, model, extern_data, run_ctx, **_kwargs):
    logits = model(extern_data["data"], extern_data["data:seq_len"])
    targets = extern_data["classes"]
    run_ctx.mark_as_loss(name="ce", loss=nn.functional.cross_entropy(logits, targets))
    run_ctx.mark_as_loss(name="fer", loss=(logits.argmax(-1) != targets).float().mean(), as_error=True)
