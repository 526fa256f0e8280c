# Healthy corpus: weight decay on the weight matrices only, as minGPT's configure_optimizers sets it up: AdamW with
# weight decay 0.1 for the weights of Linear layers, and a second group with weight decay 0 for biases, LayerNorm
# parameters, the token embedding and the position embedding. Task: a tiny causal transformer language model on a
# Markov chain over 12 symbols whose likeliest successor has probability 0.6.
import numpy as np
import torch
from torch import nn

from framework.datasets.numpy_dataset import NumpyDataset

VOCAB, LENGTH = 12, 24


class MarkovText(NumpyDataset):
    def __init__(self, split, **kwargs):
        rng = np.random.default_rng(0 if split == "train" else 1)
        successor = np.random.default_rng(6).permutation(VOCAB)
        tokens = np.zeros((2000 if split == "train" else 300, LENGTH), dtype=np.int64)
        tokens[:, 0] = rng.integers(0, VOCAB, size=len(tokens))
        for t in range(1, LENGTH):
            likely = rng.random(len(tokens)) < 0.6
            tokens[:, t] = np.where(likely, successor[tokens[:, t - 1]], rng.integers(0, VOCAB, size=len(tokens)))
        super().__init__({"data": tokens}, sparse_dims={"data": VOCAB}, **kwargs)


def _decayed(name, param):
    return name.endswith("weight") and param.dim() == 2 and "embed" not in name


train = {"class": MarkovText, "split": "train"}
dev = {"class": MarkovText, "split": "dev"}
extern_data = {"data": {"shape": (LENGTH,), "dtype": "int64", "sparse_dim": VOCAB}}
batch_size = 32
num_epochs = 2
learning_rate = 1e-3
optimizer = {
    "class": "adamw",
    "betas": (0.9, 0.95),
    "param_groups": [{"params": _decayed, "weight_decay": 0.1}, {"params": "*", "weight_decay": 0.0}],
}


class TinyGPT(nn.Module):
    def __init__(self):
        super().__init__()
        self.token_embed = nn.Embedding(VOCAB, 64)
        self.position_embed = nn.Embedding(LENGTH, 64)
        layer = nn.TransformerEncoderLayer(64, 4, 128, dropout=0.0, batch_first=True, norm_first=True)
        self.blocks = nn.TransformerEncoder(layer, 2)
        self.ln_f = nn.LayerNorm(64)
        self.head = nn.Linear(64, VOCAB)

    def forward(self, tokens):
        steps = tokens.shape[1]
        causal = torch.triu(torch.full((steps, steps), float("-inf"), device=tokens.device), 1)
        x = self.token_embed(tokens) + self.position_embed(torch.arange(steps, device=tokens.device))
        return self.head(self.ln_f(self.blocks(x, mask=causal)))


def get_model(**_kwargs):
    return TinyGPT()


def train_step(*, model, extern_data, run_ctx, **_kwargs):
    tokens = extern_data["data"]
    logits = model(tokens[:, :-1])
    targets = tokens[:, 1:]
    run_ctx.mark_as_loss(name="ce", loss=nn.functional.cross_entropy(logits.flatten(0, 1), targets.flatten()))
    run_ctx.mark_as_loss(name="err", loss=(logits.argmax(-1) != targets).float().mean(), as_error=True)
