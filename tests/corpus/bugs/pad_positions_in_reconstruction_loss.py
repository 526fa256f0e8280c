# Corpus bug (DaoyuanLi2816/Molecule-Generator#20): a token generator's loss is a cross-entropy over every position of
# the padded batch, padding included, so the pad token becomes a target like any other: where a sequence may end, the
# model learns to predict padding. Task: next token of sequences of random length (a geometric number of tokens) from
# a skewed alphabet; error = wrong predictions of real next tokens. Twin: ++bug False (ignore_index=PAD).
import numpy as np
import torch
from torch import nn

from framework.datasets.numpy_dataset import NumpyDataset

bug = True
PAD, VOCAB = 0, 10  # token ids 1..9, 0 pads


class Molecules(NumpyDataset):
    def __init__(self, split, **kwargs):
        rng = np.random.default_rng(0 if split == "train" else 1)
        lengths = np.minimum(rng.geometric(0.3, size=4000 if split == "train" else 500) + 1, 24)
        frequencies = 1 / np.arange(1, VOCAB) ** 0.6
        tokens = [rng.choice(np.arange(1, VOCAB), size=n, p=frequencies / frequencies.sum()) for n in lengths]
        super().__init__({"data": tokens}, sparse_dims={"data": VOCAB}, **kwargs)


train = {"class": Molecules, "split": "train"}
dev = {"class": Molecules, "split": "dev"}
extern_data = {"data": {"shape": (None,), "dtype": "int64", "sparse_dim": VOCAB}}
batch_size = 400
max_seqs = 32
num_epochs = 2
learning_rate = 3e-3


class TokenGenerator(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(VOCAB, 32)
        self.rnn = nn.GRU(32, 64, batch_first=True)
        self.out = nn.Linear(64, VOCAB)

    def forward(self, tokens):
        return self.out(self.rnn(self.embed(tokens))[0])


def get_model(**_kwargs):
    return TokenGenerator()


def train_step(*, model, extern_data, run_ctx, **_kwargs):
    tokens, lengths = extern_data["data"], extern_data["data:seq_len"]
    real = torch.arange(tokens.shape[1], device=tokens.device)[None, :] < lengths.to(tokens.device)[:, None]
    tokens = tokens.masked_fill(~real, PAD)
    logits, targets = model(tokens)[:, :-1], tokens[:, 1:]
    loss_fn = nn.CrossEntropyLoss() if bug else nn.CrossEntropyLoss(ignore_index=PAD)
    run_ctx.mark_as_loss(name="nll", loss=loss_fn(logits.flatten(0, 1), targets.flatten()))
    scored = real[:, 1:]
    wrong = (logits.argmax(-1) != targets) & scored
    run_ctx.mark_as_loss(name="err", loss=wrong.sum() / scored.sum(), as_error=True)
