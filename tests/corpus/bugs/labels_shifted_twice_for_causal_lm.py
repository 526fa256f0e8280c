# Corpus bug (InternLM/InternLM#318): the dataset shifts the labels one token left of the inputs, and the causal LM's
# loss shifts them once more (as Hugging Face models do internally), so every position is trained on the token two
# steps ahead. Task: next token of a Markov chain whose likeliest successor has probability 0.6.
# Twin: ++bug False (labels = the input tokens; the loss does the one shift).
import numpy as np
from torch import nn

from framework.datasets.numpy_dataset import NumpyDataset

bug = True
VOCAB, LENGTH = 12, 24


class MarkovText(NumpyDataset):
    def __init__(self, split, **kwargs):
        rng = np.random.default_rng(0 if split == "train" else 1)
        successor = np.random.default_rng(7).permutation(VOCAB)
        tokens = np.zeros((2000 if split == "train" else 300, LENGTH), dtype=np.int64)
        tokens[:, 0] = rng.integers(0, VOCAB, size=len(tokens))
        for t in range(1, LENGTH):
            likely = rng.random(len(tokens)) < 0.6
            tokens[:, t] = np.where(likely, successor[tokens[:, t - 1]], rng.integers(0, VOCAB, size=len(tokens)))
        if bug:  # the bug: shifted here, and again in the loss; the freed last position is ignored (-100)
            labels = np.concatenate([tokens[:, 1:], np.full((len(tokens), 1), -100)], 1)
        else:
            labels = tokens
        super().__init__({"data": tokens, "classes": labels}, sparse_dims={"data": VOCAB, "classes": VOCAB}, **kwargs)


train = {"class": MarkovText, "split": "train"}
dev = {"class": MarkovText, "split": "dev"}
extern_data = {
    "data": {"shape": (LENGTH,), "dtype": "int64", "sparse_dim": VOCAB},
    "classes": {"shape": (LENGTH,), "dtype": "int64", "sparse_dim": VOCAB},
}
batch_size = 32
num_epochs = 2
learning_rate = 3e-3


class TinyCausalLM(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(VOCAB, 32)
        self.rnn = nn.GRU(32, 64, batch_first=True)
        self.lm_head = nn.Linear(64, VOCAB)

    def forward(self, tokens):
        states, _ = self.rnn(self.embed(tokens))
        return self.lm_head(states)


def get_model(**_kwargs):
    return TinyCausalLM()


def train_step(*, model, extern_data, run_ctx, **_kwargs):
    logits = model(extern_data["data"])
    # as in a causal LM's forward: position t predicts label t + 1
    shift_logits, shift_labels = logits[:, :-1], extern_data["classes"][:, 1:]
    run_ctx.mark_as_loss(
        name="ce", loss=nn.functional.cross_entropy(shift_logits.flatten(0, 1), shift_labels.flatten())
    )
    scored = shift_labels != -100
    wrong = (shift_logits.argmax(-1) != shift_labels) & scored
    run_ctx.mark_as_loss(name="err", loss=wrong.sum() / scored.sum(), as_error=True)
