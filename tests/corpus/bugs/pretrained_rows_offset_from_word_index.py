# Corpus bug (fchollet/deep-learning-with-python-notebooks#145): the matrix of pretrained word vectors is filled by the
# raw word index, but the token ids of the data are that index plus 3 (ids 0-2 are reserved for padding, start and
# unknown), so every token is looked up in the row of another word. The vectors stay frozen, as in the source.
# Task: each sentence of 8 words is labelled by the topic that most of its words belong to; a word's pretrained vector
# encodes its topic. Dev sentences use only words never seen in training, so only the pretrained vectors can carry
# over. Twin: ++bug False (row index + 3 holds the vector of word index).
import numpy as np
import torch
from torch import nn

from framework.datasets.numpy_dataset import NumpyDataset

bug = True
WORDS, TOPICS, DIM, RESERVED = 200, 4, 16, 3
_rng = np.random.default_rng(11)
TOPIC_OF_WORD = _rng.integers(0, TOPICS, size=WORDS)
VECTORS = (np.eye(TOPICS, DIM)[TOPIC_OF_WORD] * 2.0 + _rng.normal(size=(WORDS, DIM)) * 0.5).astype(np.float32)


class TopicSentences(NumpyDataset):
    def __init__(self, split, **kwargs):
        rng = np.random.default_rng(0 if split == "train" else 1)
        words = np.arange(0, 120) if split == "train" else np.arange(120, WORDS)
        n = 3000 if split == "train" else 600
        labels = rng.integers(0, TOPICS, size=n)
        tokens = np.zeros((n, 8), dtype=np.int64)
        for i, topic in enumerate(labels):
            on_topic = rng.choice(words[TOPIC_OF_WORD[words] == topic], size=5)
            tokens[i] = rng.permutation(np.concatenate([on_topic, rng.choice(words, size=3)])) + RESERVED
        super().__init__(
            {"data": tokens, "classes": labels}, sparse_dims={"data": WORDS + RESERVED, "classes": TOPICS}, **kwargs
        )


train = {"class": TopicSentences, "split": "train"}
dev = {"class": TopicSentences, "split": "dev"}
extern_data = {
    "data": {"shape": (8,), "dtype": "int64", "sparse_dim": WORDS + RESERVED},
    "classes": {"shape": (), "dtype": "int64", "sparse_dim": TOPICS},
}
batch_size = 32
num_epochs = 3
learning_rate = 3e-3


def embedding_matrix():
    matrix = np.zeros((WORDS + RESERVED, DIM), dtype=np.float32)
    for word in range(WORDS):
        matrix[word if bug else word + RESERVED] = VECTORS[word]
    return torch.from_numpy(matrix)


class BagOfVectors(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding.from_pretrained(embedding_matrix(), freeze=True)
        self.classifier = nn.Sequential(nn.Linear(DIM, 32), nn.ReLU(), nn.Linear(32, TOPICS))

    def forward(self, tokens):
        return self.classifier(self.embed(tokens).mean(1))


def get_model(**_kwargs):
    return BagOfVectors()


def train_step(*, model, extern_data, run_ctx, **_kwargs):
    logits = model(extern_data["data"])
    targets = extern_data["classes"]
    run_ctx.mark_as_loss(name="ce", loss=nn.functional.cross_entropy(logits, targets))
    run_ctx.mark_as_loss(name="err", loss=(logits.argmax(-1) != targets).float().mean(), as_error=True)
