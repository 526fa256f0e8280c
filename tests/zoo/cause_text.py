# Zoo base (issue 41): a healthy text classifier written the way the torch text tutorial writes it: the
# raw text is tokenized, a vocabulary is built from the training text (words seen at least twice, <unk> = 0
# for the rest), each text becomes a list of ids, and nn.EmbeddingBag averages their embeddings.
# The topic of a text is given by which of four groups of words it uses.
from collections import Counter

import numpy as np
import torch
from torch import nn

_rng = np.random.default_rng(3)
_words = [f"Word{i}" for i in range(200)]  # four topics of 50 words each
_topics = _rng.integers(0, 4, 1200)
_texts = [" ".join(_rng.choice(_words[50 * t : 50 * t + 50], _rng.integers(6, 14))) for t in _topics]


def tokenize(text):
    return text.split()


def build_vocab(texts, min_freq=2):
    counts = Counter(token for text in texts for token in tokenize(text))
    return {"<unk>": 0} | {w: i + 1 for i, w in enumerate(sorted(w for w, c in counts.items() if c >= min_freq))}


vocab = build_vocab(_texts[:1000])


def numericalize(text):
    return np.array([vocab.get(token, vocab["<unk>"]) for token in tokenize(text)])


def datasets():
    """train, dev and extern_data from the texts (a bug file that changes the vocabulary calls it again)."""
    ids = [numericalize(t) for t in _texts]
    sparse = {"data": len(vocab), "classes": 4}
    return (
        {"class": "NumpyDataset", "arrays": {"data": ids[:1000], "classes": _topics[:1000]}, "sparse_dims": sparse},
        {"class": "NumpyDataset", "arrays": {"data": ids[1000:], "classes": _topics[1000:]}, "sparse_dims": sparse},
        {
            "data": {"shape": (None,), "dtype": "int64", "sparse_dim": len(vocab)},
            "classes": {"shape": (), "dtype": "int64", "sparse_dim": 4},
        },
    )


train, dev, extern_data = datasets()
batch_size = 500
max_seqs = 32
num_epochs = 2
optimizer = {"class": "sgd"}
learning_rate = 5.0
gradient_clip_global_norm = 0.1  # the tutorial clips at 0.1


class TextClassificationModel(nn.Module):
    def __init__(self, vocab_size, embed_dim, num_class):
        super().__init__()
        self.embedding = nn.EmbeddingBag(vocab_size, embed_dim)
        self.fc = nn.Linear(embed_dim, num_class)
        self.embedding.weight.data.uniform_(-0.5, 0.5)
        self.fc.weight.data.uniform_(-0.5, 0.5)
        self.fc.bias.data.zero_()

    def forward(self, text, offsets):
        return self.fc(self.embedding(text, offsets))


def get_model(*, epoch, step, **_kwargs):
    return TextClassificationModel(len(vocab), 32, 4)


def train_step(*, model, extern_data, run_ctx, **_kwargs):
    tokens, lengths = extern_data["data"], extern_data["data:seq_len"]
    real = [tokens[i, :n] for i, n in enumerate(lengths.tolist())]
    offsets = lengths.new_tensor([0] + [len(r) for r in real[:-1]]).cumsum(0).to(tokens.device)
    logits = model(torch.cat(real), offsets)
    targets = extern_data["classes"]
    run_ctx.mark_as_loss(name="ce", loss=nn.functional.cross_entropy(logits, targets))
    run_ctx.mark_as_loss(name="fer", loss=(logits.argmax(-1) != targets).float().mean(), as_error=True)
