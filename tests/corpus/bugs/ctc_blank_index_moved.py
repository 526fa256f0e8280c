# Corpus bug (SeanNaren/deepspeech.pytorch#354): the label alphabet was reordered so that the blank is its last entry,
# while the CTC loss kept its default blank=0: the first real symbol is trained as the blank and the blank as a symbol.
# The greedy decoder knows where the blank is. Task: read a symbol sequence from noisy frames that repeat each symbol.
# Twin: ++bug False (CTCLoss(blank=BLANK)).
import numpy as np
import torch
from torch import nn

from framework.datasets.numpy_dataset import NumpyDataset

bug = True
SYMBOLS = 6
BLANK = SYMBOLS  # alphabet = symbols 0..5, then the blank


class Frames(NumpyDataset):
    def __init__(self, split, **kwargs):
        rng = np.random.default_rng(0 if split == "train" else 1)
        codes = np.random.default_rng(5).normal(size=(SYMBOLS + 1, 12))
        frames, labels = [], []
        for _ in range(1500 if split == "train" else 300):
            symbols = rng.integers(0, SYMBOLS, size=rng.integers(2, 6))
            ids = []
            for s in symbols:
                ids += [s] * int(rng.integers(2, 5)) + [BLANK] * int(rng.integers(1, 3))
            frames.append((codes[ids] + 0.5 * rng.normal(size=(len(ids), 12))).astype(np.float32))
            labels.append(symbols.astype(np.int64))
        super().__init__({"data": frames, "classes": labels}, sparse_dims={"classes": SYMBOLS}, **kwargs)


train = {"class": Frames, "split": "train"}
dev = {"class": Frames, "split": "dev"}
extern_data = {"data": {"shape": (None, 12)}, "classes": {"shape": (None,), "dtype": "int64", "sparse_dim": SYMBOLS}}
batch_size = 800
max_seqs = 32
num_epochs = 3
learning_rate = 3e-3


class Reader(nn.Module):
    def __init__(self):
        super().__init__()
        self.rnn = nn.GRU(12, 64, batch_first=True, bidirectional=True)
        self.out = nn.Linear(128, SYMBOLS + 1)

    def forward(self, frames):
        return self.out(self.rnn(frames)[0]).log_softmax(-1)


def get_model(**_kwargs):
    return Reader()


def greedy_errors(log_probs, lengths, labels, label_lengths):
    errors, total = 0, 0
    for best, t, ref, n in zip(
        log_probs.argmax(-1).tolist(), lengths.tolist(), labels.tolist(), label_lengths.tolist(), strict=True
    ):
        hyp = [s for i, s in enumerate(best[:t]) if s != BLANK and (i == 0 or s != best[i - 1])]
        errors += int(hyp != ref[:n])
        total += 1
    return errors / total


def train_step(*, model, extern_data, run_ctx, **_kwargs):
    frames, lengths = extern_data["data"], extern_data["data:seq_len"]
    labels, label_lengths = extern_data["classes"], extern_data["classes:seq_len"]
    log_probs = model(frames)
    ctc = nn.CTCLoss() if bug else nn.CTCLoss(blank=BLANK)
    loss = ctc(log_probs.transpose(0, 1), labels, lengths.cpu(), label_lengths.cpu())
    run_ctx.mark_as_loss(name="ctc", loss=loss)
    run_ctx.mark_as_loss(
        name="err", loss=torch.tensor(greedy_errors(log_probs, lengths, labels, label_lengths)), as_error=True
    )
