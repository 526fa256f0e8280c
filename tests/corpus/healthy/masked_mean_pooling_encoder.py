# Healthy corpus: a transformer encoder over padded token sequences whose sentence vector is the mean of the token
# outputs weighted by the attention mask (the sum of the masked outputs divided by the number of real tokens), as
# sentence-transformers pools (mean_pooling in the all-MiniLM-L6-v2 model card). Task: sequences of 3 to 30 tokens;
# the class is which of three marker tokens occurs most often.
import numpy as np
import torch
from torch import nn

from framework.datasets.numpy_dataset import NumpyDataset

VOCAB, PAD, CLASSES = 20, 0, 3  # tokens 1..3 are the markers


class Marked(NumpyDataset):
    def __init__(self, split, **kwargs):
        rng = np.random.default_rng(0 if split == "train" else 1)
        seqs, labels = [], []
        for _ in range(3000 if split == "train" else 500):
            length = int(rng.integers(3, 31))
            tokens = rng.integers(4, VOCAB, size=length)
            label = int(rng.integers(0, CLASSES))
            count = int(rng.integers(1, max(2, length // 2)))
            tokens[rng.permutation(length)[:count]] = 1 + label
            seqs.append(tokens.astype(np.int64))
            labels.append(label)
        super().__init__(
            {"data": seqs, "classes": np.array(labels)}, sparse_dims={"data": VOCAB, "classes": CLASSES}, **kwargs
        )


train = {"class": Marked, "split": "train"}
dev = {"class": Marked, "split": "dev"}
extern_data = {
    "data": {"shape": (None,), "dtype": "int64", "sparse_dim": VOCAB},
    "classes": {"shape": (), "dtype": "int64", "sparse_dim": CLASSES},
}
batch_size = 32 * 30
max_seqs = 32
num_epochs = 3
learning_rate = 1e-3


class Encoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(VOCAB, 64, padding_idx=PAD)
        self.positions = nn.Embedding(32, 64)
        layer = nn.TransformerEncoderLayer(64, 4, 128, dropout=0.0, batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, 2)
        self.out = nn.Linear(64, CLASSES)

    def forward(self, tokens, attention_mask):
        x = self.embed(tokens) + self.positions(torch.arange(tokens.shape[1], device=tokens.device))[None]
        token_embeddings = self.encoder(x, src_key_padding_mask=~attention_mask.bool())
        mask = attention_mask.unsqueeze(-1).float()
        pooled = (token_embeddings * mask).sum(1) / mask.sum(1).clamp(min=1e-9)  # mean_pooling
        return self.out(pooled)


def get_model(**_kwargs):
    return Encoder()


def train_step(*, model, extern_data, run_ctx, **_kwargs):
    tokens = extern_data["data"]
    lengths = extern_data["data:seq_len"].to(tokens.device)
    attention_mask = (torch.arange(tokens.shape[1], device=tokens.device)[None, :] < lengths[:, None]).long()
    logits = model(tokens, attention_mask)
    targets = extern_data["classes"]
    run_ctx.mark_as_loss(name="ce", loss=nn.functional.cross_entropy(logits, targets))
    run_ctx.mark_as_loss(name="err", loss=(logits.argmax(-1) != targets).float().mean(), as_error=True)
