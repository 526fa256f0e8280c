# Healthy corpus: Kim's CNN-static. The word vectors are given up front and kept frozen; only the convolution and the
# classifier on top are trained. Task: sentences of 10 words labelled by the topic most of their words belong to;
# a word's given vector encodes its topic.
import numpy as np
import torch
from torch import nn

from framework.datasets.numpy_dataset import NumpyDataset

WORDS, TOPICS, DIM = 300, 5, 24
_rng = np.random.default_rng(21)
TOPIC_OF_WORD = _rng.integers(0, TOPICS, size=WORDS)
VECTORS = (np.eye(TOPICS, DIM)[TOPIC_OF_WORD] * 1.5 + _rng.normal(size=(WORDS, DIM)) * 0.5).astype(np.float32)


class TopicSentences(NumpyDataset):
    def __init__(self, split, **kwargs):
        rng = np.random.default_rng(0 if split == "train" else 1)
        n = 3000 if split == "train" else 600
        labels = rng.integers(0, TOPICS, size=n)
        tokens = np.zeros((n, 10), dtype=np.int64)
        for i, topic in enumerate(labels):
            on_topic = rng.choice(np.flatnonzero(TOPIC_OF_WORD == topic), size=5)
            tokens[i] = rng.permutation(np.concatenate([on_topic, rng.integers(0, WORDS, size=5)]))
        super().__init__({"data": tokens, "classes": labels}, sparse_dims={"data": WORDS, "classes": TOPICS}, **kwargs)


train = {"class": TopicSentences, "split": "train"}
dev = {"class": TopicSentences, "split": "dev"}
extern_data = {
    "data": {"shape": (10,), "dtype": "int64", "sparse_dim": WORDS},
    "classes": {"shape": (), "dtype": "int64", "sparse_dim": TOPICS},
}
batch_size = 50
num_epochs = 3
learning_rate = 2e-3


class CnnStatic(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding.from_pretrained(torch.from_numpy(VECTORS), freeze=True)
        self.conv = nn.Conv1d(DIM, 50, kernel_size=3, padding=1)
        self.dropout = nn.Dropout(0.5)
        self.out = nn.Linear(50, TOPICS)

    def forward(self, tokens):
        features = torch.relu(self.conv(self.embed(tokens).transpose(1, 2))).max(-1).values
        return self.out(self.dropout(features))


def get_model(**_kwargs):
    return CnnStatic()


def train_step(*, model, extern_data, run_ctx, **_kwargs):
    logits = model(extern_data["data"])
    targets = extern_data["classes"]
    run_ctx.mark_as_loss(name="ce", loss=nn.functional.cross_entropy(logits, targets))
    run_ctx.mark_as_loss(name="err", loss=(logits.argmax(-1) != targets).float().mean(), as_error=True)
