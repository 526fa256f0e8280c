# Corpus bug (alex-matton/causal-transformer-decoder#1): the transformer decoder (nn.TransformerDecoder layers) is
# trained on whole target sequences without a causal tgt_mask, so each position can attend to the following target
# tokens and the network learns to copy the next token from its input instead of predicting it; autoregressive
# decoding, which has no future tokens, then performs terribly (the reporter: "the performance is terrible"). Task:
# reverse a sequence of 8 digits where 30% of the target tokens are random digits the source does not determine (as
# much of real text is not determined by its context); nn.TransformerEncoder over the source, nn.TransformerDecoder
# over the shifted target (teacher forcing) in training; evaluation decodes greedily, one token at a time, as the
# repository's inference path does (causal, the past only). The error is the dev token error of the greedy output
# (0.27 at best: the random tokens). Twin: ++bug False (a causal tgt_mask in training).
import numpy as np
import torch
from torch import nn

from framework.datasets.numpy_dataset import NumpyDataset

bug = True
LENGTH, DIGITS, D_MODEL, NOISE = 8, 10, 64, 0.3
BOS = DIGITS


class Reversal(NumpyDataset):
    def __init__(self, split, **kwargs):
        rng = np.random.default_rng(0 if split == "train" else 1)
        source = rng.integers(0, DIGITS, size=(3000 if split == "train" else 500, LENGTH))
        target = source[:, ::-1].copy()
        noisy = rng.random(target.shape) < NOISE  # tokens the source does not determine
        target[noisy] = rng.integers(0, DIGITS, size=noisy.sum())
        super().__init__(
            {"data": source, "classes": target},
            sparse_dims={"data": DIGITS, "classes": DIGITS},
            **kwargs,
        )


train = {"class": Reversal, "split": "train"}
dev = {"class": Reversal, "split": "dev"}
extern_data = {
    "data": {"shape": (LENGTH,), "dtype": "int64", "sparse_dim": DIGITS},
    "classes": {"shape": (LENGTH,), "dtype": "int64", "sparse_dim": DIGITS},
}
batch_size = 50
num_epochs = 3
learning_rate = 3e-3


class Seq2Seq(nn.Module):
    def __init__(self):
        super().__init__()
        self.src_embed = nn.Embedding(DIGITS, D_MODEL)
        self.tgt_embed = nn.Embedding(DIGITS + 1, D_MODEL)
        self.positions = nn.Parameter(torch.randn(LENGTH, D_MODEL) * 0.1)
        self.encoder = nn.TransformerEncoder(
            nn.TransformerEncoderLayer(D_MODEL, 4, 128, dropout=0.0, batch_first=True), 1
        )
        self.decoder = nn.TransformerDecoder(
            nn.TransformerDecoderLayer(D_MODEL, 4, 128, dropout=0.0, batch_first=True), 1
        )
        self.out = nn.Linear(D_MODEL, DIGITS)

    def encode(self, source):
        return self.encoder(self.src_embed(source) + self.positions)

    def decode(self, memory, target_in, causal):
        steps = target_in.shape[1]
        mask = nn.Transformer.generate_square_subsequent_mask(steps, device=target_in.device) if causal else None
        x = self.tgt_embed(target_in) + self.positions[:steps]
        return self.out(self.decoder(x, memory, tgt_mask=mask, tgt_is_causal=causal))


def get_model(**_kwargs):
    return Seq2Seq()


def greedy(model, memory):
    target_in = torch.full((memory.shape[0], 1), BOS, dtype=torch.long, device=memory.device)
    for _ in range(LENGTH):
        following = model.decode(memory, target_in, causal=True)[:, -1].argmax(-1)
        target_in = torch.cat([target_in, following[:, None]], 1)
    return target_in[:, 1:]


def train_step(*, model, extern_data, run_ctx, **_kwargs):
    source, target = extern_data["data"], extern_data["classes"]
    memory = model.encode(source)
    target_in = torch.cat([torch.full_like(target[:, :1], BOS), target[:, :-1]], 1)
    logits = model.decode(memory, target_in, causal=not bug)
    run_ctx.mark_as_loss(name="ce", loss=nn.functional.cross_entropy(logits.transpose(1, 2), target))
    if run_ctx.train_flag:
        predicted = logits.argmax(-1)
    else:
        with torch.no_grad():
            predicted = greedy(model, memory)
    run_ctx.mark_as_loss(name="err", loss=(predicted != target).float().mean(), as_error=True)
