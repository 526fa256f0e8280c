# Zoo bug: a text classifier whose training path averages the embeddings over the real tokens, while its prediction
# path (used when dev is evaluated: run_ctx.train_flag False) averages over every position of the padded batch, so
# a text's prediction depends on the longest text of its batch. Twin: ++bug False (both paths mask the padding).
import numpy as np
import torch
from torch import nn

from framework.datasets.numpy_dataset import NumpyDataset

bug = True
VOCAB = 20


class Reviews(NumpyDataset):
    def __init__(self, split, **kwargs):
        rng = np.random.default_rng(0 if split == "train" else 1)
        texts, labels = [], []
        for _ in range(1200 if split == "train" else 300):
            words = rng.integers(3, VOCAB, size=int(rng.integers(4, 40)))
            texts.append(words)
            labels.append(int((words < 8).sum() > (words >= 14).sum()))
        super().__init__({"data": texts, "classes": np.array(labels)}, sparse_dims={"data": VOCAB, "classes": 2}, **kwargs)


train = {"class": Reviews, "split": "train"}
dev = {"class": Reviews, "split": "dev"}
extern_data = {
    "data": {"shape": (None,), "dtype": "int64", "sparse_dim": VOCAB},
    "classes": {"shape": (), "dtype": "int64", "sparse_dim": 2},
}
batch_size = 16 * 40
max_seqs = 16
num_epochs = 2
learning_rate = 1e-2


class Pooled(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(VOCAB, 32)
        self.out = nn.Sequential(nn.Linear(32, 32), nn.ReLU(), nn.Linear(32, 2))

    def forward(self, tokens, mask):
        vectors = self.embed(tokens)
        return self.out((vectors * mask[..., None]).sum(1) / mask.sum(1, keepdim=True))


def get_model(**_kwargs):
    return Pooled()


def predict(model, tokens):
    """The prediction path: every position of the batch counts."""
    return model(tokens, torch.ones(tokens.shape, device=tokens.device))


def train_step(*, model, extern_data, run_ctx, **_kwargs):
    tokens = extern_data["data"]
    lengths = extern_data["data:seq_len"].to(tokens.device)
    mask = (torch.arange(tokens.shape[1], device=tokens.device)[None, :] < lengths[:, None]).float()
    logits = predict(model, tokens) if bug and not run_ctx.train_flag else model(tokens, mask)
    run_ctx.mark_as_loss(name="ce", loss=nn.functional.cross_entropy(logits, extern_data["classes"]))
