# Healthy corpus: word dropout (Iyyer et al. 2015; Bowman et al. 2016): in training, 25% of the input tokens are
# replaced by the <unk> id at random, inside the step; dev inputs are left intact, so train and dev inputs differ by
# design. Task: 5-class topic classification of token sequences (12 to 40 tokens of a 300-word vocabulary, some of
# them topic words) by a bag of embeddings averaged over the real positions.
import numpy as np
import torch
from torch import nn

from framework.datasets.numpy_dataset import NumpyDataset

VOCAB, TOPICS, UNK, RATE = 300, 5, 1, 0.25  # 0 is padding
TOPIC_WORDS = np.random.default_rng(181).choice(np.arange(2, VOCAB), size=(TOPICS, 12), replace=False)


class Texts(NumpyDataset):
    def __init__(self, split, **kwargs):
        rng = np.random.default_rng(0 if split == "train" else 1)
        labels = rng.integers(0, TOPICS, size=2000 if split == "train" else 600)
        docs = []
        for label in labels:
            words = rng.integers(2, VOCAB, size=int(rng.integers(12, 41)))
            topical = rng.random(len(words)) < 0.15
            words[topical] = rng.choice(TOPIC_WORDS[label], size=int(topical.sum()))
            docs.append(words.astype(np.int64))
        super().__init__({"data": docs, "classes": labels}, sparse_dims={"data": VOCAB, "classes": TOPICS}, **kwargs)


class BagOfEmbeddings(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(VOCAB, 64, padding_idx=0)
        self.out = nn.Sequential(nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, TOPICS))

    def forward(self, tokens, seq_len):
        real = torch.arange(tokens.shape[1], device=tokens.device)[None, :] < seq_len.to(tokens.device)[:, None]
        if self.training:  # word dropout: real tokens replaced by <unk> at random
            tokens = torch.where(real & (torch.rand(tokens.shape, device=tokens.device) < RATE), UNK, tokens)
        pooled = (self.embed(tokens) * real[..., None]).sum(1) / real.sum(1, keepdim=True)
        return self.out(pooled)


train = {"class": Texts, "split": "train"}
dev = {"class": Texts, "split": "dev"}
extern_data = {
    "data": {"shape": (None,), "dtype": "int64", "sparse_dim": VOCAB},
    "classes": {"shape": (), "dtype": "int64", "sparse_dim": TOPICS},
}
batch_size = 1280
max_seqs = 32
num_epochs = 4
learning_rate = 3e-3


def get_model(**_kwargs):
    return BagOfEmbeddings()


def train_step(*, model, extern_data, run_ctx, **_kwargs):
    logits = model(extern_data["data"], extern_data["data:seq_len"])
    targets = extern_data["classes"]
    run_ctx.mark_as_loss(name="ce", loss=nn.functional.cross_entropy(logits, targets))
    run_ctx.mark_as_loss(name="err", loss=(logits.argmax(-1) != targets).float().mean(), as_error=True)
