# Corpus bug (urchade/GLiNER#378): texts longer than the model's max_len were truncated to their first max_len
# tokens without an error, so whatever came after the cut (most of a long article) was never read, while the
# results looked normal. Task: documents of 20 to 200 tokens over a vocabulary of 60 filler words, each with one of
# 4 cue words at a random position that gives its class; the tokeniser (a step of the dataset) truncates to
# MAX_LEN = 48 tokens, for training and dev alike. Model: embeddings, a 1-d convolution and a max over the real
# positions. Twin: ++bug False (no truncation: the whole document is read).
import numpy as np
import torch
from torch import nn

from framework.datasets.numpy_dataset import NumpyDataset

bug = True
FILLER, CLASSES, MAX_LEN = 60, 4, 48
VOCAB = FILLER + CLASSES + 1  # 0 is padding


def tokenize(words):
    return words[:MAX_LEN] if bug else words  # read at call time: ++bug False applies after the file ran


class Documents(NumpyDataset):
    def __init__(self, split, **kwargs):
        rng = np.random.default_rng(0 if split == "train" else 1)
        n = 1500 if split == "train" else 500
        labels = rng.integers(0, CLASSES, size=n)
        docs = []
        for label in labels:
            words = rng.integers(1, FILLER + 1, size=int(rng.integers(20, 201)))
            words[rng.integers(0, len(words))] = FILLER + 1 + label
            docs.append(tokenize(words).astype(np.int64))
        super().__init__({"data": docs, "classes": labels}, sparse_dims={"data": VOCAB, "classes": CLASSES}, **kwargs)


train = {"class": Documents, "split": "train"}
dev = {"class": Documents, "split": "dev"}
extern_data = {
    "data": {"shape": (None,), "dtype": "int64", "sparse_dim": VOCAB},
    "classes": {"shape": (), "dtype": "int64", "sparse_dim": CLASSES},
}
batch_size = 3200
max_seqs = 32
num_epochs = 4
learning_rate = 3e-3


class ConvMax(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(VOCAB, 32, padding_idx=0)
        self.conv = nn.Conv1d(32, 64, kernel_size=3, padding=1)
        self.out = nn.Linear(64, CLASSES)

    def forward(self, tokens, seq_len):
        hidden = torch.relu(self.conv(self.embed(tokens).transpose(1, 2))).transpose(1, 2)  # [B, T, 64]
        real = torch.arange(tokens.shape[1], device=tokens.device)[None, :] < seq_len.to(tokens.device)[:, None]
        return self.out(hidden.masked_fill(~real[..., None], float("-inf")).amax(dim=1))


def get_model(**_kwargs):
    return ConvMax()


def train_step(*, model, extern_data, run_ctx, **_kwargs):
    logits = model(extern_data["data"], extern_data["data:seq_len"])
    targets = extern_data["classes"]
    run_ctx.mark_as_loss(name="ce", loss=nn.functional.cross_entropy(logits, targets))
    run_ctx.mark_as_loss(name="err", loss=(logits.argmax(-1) != targets).float().mean(), as_error=True)
