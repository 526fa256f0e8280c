# Corpus bug (code-gen/cscg#4): the decoder is fed at step t the target of step t (the inputs are not shifted right
# by one), so it learns to copy its input: teacher-forced loss looks excellent, greedy decoding is useless. Task:
# reverse a sequence of 6 tokens; the error is measured by greedy decoding when the model is evaluated.
# Twin: ++bug False.
import numpy as np
import torch
from torch import nn

from framework.datasets.numpy_dataset import NumpyDataset

bug = True
VOCAB, BOS, LENGTH = 8, 8, 6


class Reverse(NumpyDataset):
    def __init__(self, split, **kwargs):
        rng = np.random.default_rng(0 if split == "train" else 1)
        x = rng.integers(0, VOCAB, size=(3000 if split == "train" else 400, LENGTH))
        super().__init__(
            {"data": x, "classes": x[:, ::-1].copy()}, sparse_dims={"data": VOCAB, "classes": VOCAB}, **kwargs
        )


train = {"class": Reverse, "split": "train"}
dev = {"class": Reverse, "split": "dev"}
extern_data = {
    "data": {"shape": (LENGTH,), "dtype": "int64", "sparse_dim": VOCAB},
    "classes": {"shape": (LENGTH,), "dtype": "int64", "sparse_dim": VOCAB},
}
batch_size = 32
num_epochs = 3
learning_rate = 3e-3


class Seq2Seq(nn.Module):
    def __init__(self):
        super().__init__()
        self.source = nn.Embedding(VOCAB, 32)
        self.target = nn.Embedding(VOCAB + 1, 32)
        self.encoder = nn.GRU(32, 64, batch_first=True)
        self.decoder = nn.GRU(32, 64, batch_first=True)
        self.out = nn.Linear(64, VOCAB)

    def forward(self, source, decoder_input):
        _, state = self.encoder(self.source(source))
        states, _ = self.decoder(self.target(decoder_input), state)
        return self.out(states)

    def greedy(self, source):
        _, state = self.encoder(self.source(source))
        token = torch.full((source.shape[0], 1), BOS, device=source.device)
        outputs = []
        for _ in range(LENGTH):
            step, state = self.decoder(self.target(token), state)
            token = self.out(step).argmax(-1)
            outputs.append(token)
        return torch.cat(outputs, 1)


def get_model(**_kwargs):
    return Seq2Seq()


def train_step(*, model, extern_data, run_ctx, **_kwargs):
    source, targets = extern_data["data"], extern_data["classes"]
    if bug:
        decoder_input = targets
    else:
        decoder_input = torch.cat([torch.full_like(targets[:, :1], BOS), targets[:, :-1]], 1)
    logits = model(source, decoder_input)
    run_ctx.mark_as_loss(name="ce", loss=nn.functional.cross_entropy(logits.flatten(0, 1), targets.flatten()))
    predicted = logits.argmax(-1) if model.training else model.greedy(source)
    run_ctx.mark_as_loss(name="err", loss=(predicted != targets).float().mean(), as_error=True)
