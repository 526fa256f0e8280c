# Corpus bug (minqukanq/hierarchical-multi-label-text-classification#6): the word-to-index vocabulary is built
# separately from the training texts and from the test texts (each numbering its words by frequency), so the same
# word has another id in each and the test texts reach the embedding as other words. Task: topic classification of
# 16-word texts over a vocabulary of 300 words, 4 topics each with 25 words of its own, mean-pooled word embeddings.
# Twin: ++bug False (the training vocabulary is used for the test texts too; words it lacks map to <unk>).
from collections import Counter

import numpy as np
from torch import nn

from framework.datasets.numpy_dataset import NumpyDataset

bug = True
WORDS = [f"w{i}" for i in range(300)]  # w0..w99: the topics' words (25 each); the rest are shared
TOPICS, LENGTH, UNK = 4, 16, 1  # id 0 pads, 1 is <unk>


def texts(split):
    rng = np.random.default_rng(0 if split == "train" else 1)
    n = 3000 if split == "train" else 600
    labels = rng.integers(0, TOPICS, size=n)
    popularity = rng.permutation(200) + 1.0  # how often each shared word occurs in this split
    shared = rng.choice(np.arange(100, 300), size=(n, LENGTH), p=popularity / popularity.sum())
    docs = []
    for label, words in zip(labels, shared, strict=True):
        spots = rng.choice(LENGTH, size=rng.integers(3, 7), replace=False)
        words[spots] = rng.integers(25 * label, 25 * label + 25, size=len(spots))
        docs.append([WORDS[w] for w in words])
    return docs, labels


def build_vocab(docs):
    counts = Counter(word for doc in docs for word in doc)
    return {word: i + 2 for i, (word, _) in enumerate(counts.most_common())}


TRAIN_VOCAB = build_vocab(texts("train")[0])


class Topics(NumpyDataset):
    def __init__(self, split, **kwargs):
        docs, labels = texts(split)
        vocab = build_vocab(docs) if (split == "test" and bug) else TRAIN_VOCAB
        ids = np.array([[vocab.get(word, UNK) for word in doc] for doc in docs], dtype=np.int64)
        super().__init__({"data": ids, "classes": labels}, sparse_dims={"data": 302, "classes": TOPICS}, **kwargs)


train = {"class": Topics, "split": "train"}
dev = {"class": Topics, "split": "test"}
extern_data = {
    "data": {"shape": (LENGTH,), "dtype": "int64", "sparse_dim": 302},
    "classes": {"shape": (), "dtype": "int64", "sparse_dim": TOPICS},
}
batch_size = 32
num_epochs = 3
learning_rate = 3e-3


class MeanEmbedding(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(302, 32)
        self.out = nn.Sequential(nn.Linear(32, 32), nn.ReLU(), nn.Linear(32, TOPICS))

    def forward(self, ids):
        return self.out(self.embed(ids).mean(1))


def get_model(**_kwargs):
    return MeanEmbedding()


def train_step(*, model, extern_data, run_ctx, **_kwargs):
    logits = model(extern_data["data"])
    targets = extern_data["classes"]
    run_ctx.mark_as_loss(name="ce", loss=nn.functional.cross_entropy(logits, targets))
    run_ctx.mark_as_loss(name="err", loss=(logits.argmax(-1) != targets).float().mean(), as_error=True)
