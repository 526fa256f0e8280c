# Healthy corpus: teacher forcing in training, free-running decoding at evaluation, as the PyTorch seq2seq tutorial
# trains and evaluates: the GRU decoder gets the true previous token at every training step and its own greedy
# prediction at evaluation. Task: output the input sequence of 6 symbols sorted.
import numpy as np
import torch
from torch import nn

from framework.datasets.numpy_dataset import NumpyDataset

VOCAB, LENGTH, BOS = 8, 6, 8


class Sort(NumpyDataset):
    def __init__(self, split, **kwargs):
        rng = np.random.default_rng(0 if split == "train" else 1)
        source = rng.integers(0, VOCAB, size=(4000 if split == "train" else 500, LENGTH))
        super().__init__(
            {"data": source, "classes": np.sort(source, axis=1)},
            sparse_dims={"data": VOCAB, "classes": VOCAB},
            **kwargs,
        )


train = {"class": Sort, "split": "train"}
dev = {"class": Sort, "split": "dev"}
extern_data = {
    "data": {"shape": (LENGTH,), "dtype": "int64", "sparse_dim": VOCAB},
    "classes": {"shape": (LENGTH,), "dtype": "int64", "sparse_dim": VOCAB},
}
batch_size = 32
num_epochs = 4
learning_rate = 3e-3


class Seq2Seq(nn.Module):
    def __init__(self):
        super().__init__()
        self.src_embed = nn.Embedding(VOCAB, 32)
        self.tgt_embed = nn.Embedding(VOCAB + 1, 32)
        self.encoder = nn.GRU(32, 128, batch_first=True)
        self.decoder = nn.GRUCell(32, 128)
        self.out = nn.Linear(128, VOCAB)

    def forward(self, source, target):
        hidden = self.encoder(self.src_embed(source))[1][0]
        previous = torch.full_like(source[:, 0], BOS)
        outputs = []
        for t in range(target.shape[1]):
            hidden = self.decoder(self.tgt_embed(previous), hidden)
            logits = self.out(hidden)
            outputs.append(logits)
            previous = target[:, t] if self.training else logits.argmax(-1)  # teacher forcing / free running
        return torch.stack(outputs, 1)


def get_model(**_kwargs):
    return Seq2Seq()


def train_step(*, model, extern_data, run_ctx, **_kwargs):
    targets = extern_data["classes"]
    logits = model(extern_data["data"], targets)
    run_ctx.mark_as_loss(name="ce", loss=nn.functional.cross_entropy(logits.flatten(0, 1), targets.flatten()))
    run_ctx.mark_as_loss(name="err", loss=(logits.argmax(-1) != targets).float().mean(), as_error=True)
