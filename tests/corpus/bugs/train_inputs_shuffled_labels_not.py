# Corpus bug (DrexelChatbotGroup/DrexelChatbot#15): the training script randomises the order of the x data but not of
# the y data, so every training input is paired with the label of another example and the model learns nothing that
# holds for the correctly paired evaluation data. Task: the chatbot's question classifier in small, bag-of-words
# vectors of questions (50 words, 6 intents, each intent with its own keywords plus shared filler words); an MLP over
# the bag of words. The shuffling is the data preparation step of the training script. Twin: ++bug False (one
# permutation for both x and y).
import numpy as np
from torch import nn

from framework.datasets.numpy_dataset import NumpyDataset

bug = True
WORDS, INTENTS = 50, 6
KEYWORDS = np.random.default_rng(5).permutation(WORDS)[: INTENTS * 4].reshape(INTENTS, 4)


def questions(rng, n):
    labels = rng.integers(0, INTENTS, size=n)
    x = (rng.random((n, WORDS)) < 0.08).astype(np.float32)  # filler words
    for row, label in enumerate(labels):
        x[row, rng.choice(KEYWORDS[label], size=2, replace=False)] = 1.0
    return x, labels


class Questions(NumpyDataset):
    def __init__(self, split, **kwargs):
        rng = np.random.default_rng(0 if split == "train" else 1)
        x, y = questions(rng, 2000 if split == "train" else 500)
        if split == "train":  # the training script's randomisation of the examples
            order = rng.permutation(len(x))
            x = x[order]
            if not bug:
                y = y[order]
        super().__init__({"data": x, "classes": y}, sparse_dims={"classes": INTENTS}, **kwargs)


train = {"class": Questions, "split": "train"}
dev = {"class": Questions, "split": "dev"}
extern_data = {"data": {"shape": (WORDS,)}, "classes": {"shape": (), "dtype": "int64", "sparse_dim": INTENTS}}
batch_size = 32
num_epochs = 4
learning_rate = 1e-3


def get_model(**_kwargs):
    return nn.Sequential(nn.Linear(WORDS, 64), nn.ReLU(), nn.Linear(64, INTENTS))


def train_step(*, model, extern_data, run_ctx, **_kwargs):
    logits = model(extern_data["data"])
    targets = extern_data["classes"]
    run_ctx.mark_as_loss(name="ce", loss=nn.functional.cross_entropy(logits, targets))
    run_ctx.mark_as_loss(name="err", loss=(logits.argmax(-1) != targets).float().mean(), as_error=True)
