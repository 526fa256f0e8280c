# Healthy corpus: a one-block Conformer (half-step feed-forwards, self-attention with a key padding mask, a depthwise
# convolution module) trained with CTC on synthetic utterances: each of 2-5 labels emits 3-5 noisy frames of its
# own pattern. Lengths stay on the CPU for ctc_loss; the error is the label error of greedy CTC decoding.
import numpy as np
import torch
from torch import nn

from framework.datasets.numpy_dataset import NumpyDataset

LABELS, BLANK, WIDTH = 6, 0, 32


class Utterances(NumpyDataset):
    def __init__(self, split, **kwargs):
        rng = np.random.default_rng(0 if split == "train" else 1)
        patterns = np.random.default_rng(6).normal(size=(LABELS, 8))
        frames, transcripts = [], []
        for _ in range(1500 if split == "train" else 200):
            labels = rng.integers(1, LABELS, size=rng.integers(2, 6))
            feats = [patterns[label] + 0.4 * rng.normal(size=(rng.integers(3, 6), 8)) for label in labels]
            frames.append(np.concatenate(feats).astype(np.float32))
            transcripts.append(labels)
        arrays = {"data": frames, "classes": transcripts}
        super().__init__(arrays, sparse_dims={"classes": LABELS}, **kwargs)


train = {"class": Utterances, "split": "train"}
dev = {"class": Utterances, "split": "dev"}
extern_data = {
    "data": {"shape": (None, 8)},
    "classes": {"shape": (None,), "dtype": "int64", "sparse_dim": LABELS},
}
batch_size = 600
max_seqs = 32
num_epochs = 3
learning_rate = 2e-3


class FeedForward(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(
            nn.LayerNorm(WIDTH), nn.Linear(WIDTH, 2 * WIDTH), nn.SiLU(), nn.Linear(2 * WIDTH, WIDTH)
        )

    def forward(self, x):
        return x + 0.5 * self.net(x)


class Convolution(nn.Module):
    def __init__(self):
        super().__init__()
        self.norm = nn.LayerNorm(WIDTH)
        self.pointwise = nn.Conv1d(WIDTH, 2 * WIDTH, 1)
        self.depthwise = nn.Conv1d(WIDTH, WIDTH, 5, padding=2, groups=WIDTH)
        self.out = nn.Conv1d(WIDTH, WIDTH, 1)

    def forward(self, x, valid):
        h = self.norm(x).masked_fill(~valid[..., None], 0.0).transpose(1, 2)
        h = nn.functional.glu(self.pointwise(h), dim=1)
        return x + self.out(nn.functional.silu(self.depthwise(h))).transpose(1, 2)


class Conformer(nn.Module):
    def __init__(self):
        super().__init__()
        self.inp = nn.Linear(8, WIDTH)
        self.ff1, self.ff2 = FeedForward(), FeedForward()
        self.attn_norm = nn.LayerNorm(WIDTH)
        self.attn = nn.MultiheadAttention(WIDTH, 4, batch_first=True)
        self.conv = Convolution()
        self.norm = nn.LayerNorm(WIDTH)
        self.out = nn.Linear(WIDTH, LABELS)

    def forward(self, frames, lengths):
        valid = torch.arange(frames.shape[1], device=frames.device)[None, :] < lengths.to(frames.device)[:, None]
        x = self.ff1(self.inp(frames))
        h = self.attn_norm(x)
        x = x + self.attn(h, h, h, key_padding_mask=~valid, need_weights=False)[0]
        x = self.ff2(self.conv(x, valid))
        return self.out(self.norm(x))


def get_model(**_kwargs):
    return Conformer()


def greedy_errors(log_probs, lengths, transcripts, transcript_lengths):
    errors, total = 0, 0
    for i, best in enumerate(log_probs.argmax(-1).cpu()):
        path = best[: int(lengths[i])].tolist()
        decoded = [p for j, p in enumerate(path) if p != BLANK and (j == 0 or p != path[j - 1])]
        wanted = transcripts[i, : int(transcript_lengths[i])].tolist()
        errors += sum(a != b for a, b in zip(decoded, wanted, strict=False)) + abs(len(decoded) - len(wanted))
        total += len(wanted)
    return errors / total


def train_step(*, model, extern_data, run_ctx, **_kwargs):
    lengths = extern_data["data:seq_len"]
    log_probs = model(extern_data["data"], lengths).log_softmax(-1)
    transcripts, transcript_lengths = extern_data["classes"], extern_data["classes:seq_len"]
    loss = nn.functional.ctc_loss(
        log_probs.transpose(0, 1), transcripts, lengths.cpu(), transcript_lengths.cpu(), blank=BLANK, zero_infinity=True
    )
    run_ctx.mark_as_loss(name="ctc", loss=loss)
    if not model.training:
        error = greedy_errors(log_probs.detach(), lengths, transcripts.cpu(), transcript_lengths)
        run_ctx.mark_as_loss(name="err", loss=torch.tensor(error), as_error=True)
