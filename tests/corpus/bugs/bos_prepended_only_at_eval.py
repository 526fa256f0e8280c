# Corpus bug (RLHFlow/RLHF-Reward-Modeling#16): a reward model was trained on token sequences without the BOS token
# (a tokenizer bug at the time), while the pipeline that scores texts adds BOS itself: every scored sequence starts
# with a token the model never saw, and its tokens sit one position later. Task: a prompt of 3 to 5 symbols, a separator
# and a response as long; the response is good when it is the prompt reversed and bad when one or two of its
# symbols are wrong; a 2-layer causal transformer with learned absolute positions scores the last position (as a
# reward model does) with a good/bad classifier. Twin: ++bug False (the scored sequences are tokenized as in training).
import numpy as np
import torch
from torch import nn

from framework.datasets.numpy_dataset import NumpyDataset

bug = True
VOCAB, BOS, SEP = 16, 1, 2  # 0 pads; 3..15 are symbols
LENGTH = 2 * 5 + 1  # the longest sequence


class Responses(NumpyDataset):
    def __init__(self, split, **kwargs):
        rng = np.random.default_rng(0 if split == "train" else 1)
        n = 5000 if split == "train" else 1000
        labels = rng.integers(0, 2, size=n)
        rows = []
        for label in labels:
            half = rng.integers(3, 6)
            prompt = rng.integers(3, VOCAB, size=half)
            response = prompt[::-1].copy()
            if label == 0:
                wrong = rng.choice(half, size=rng.integers(1, 3), replace=False)
                response[wrong] = (response[wrong] - 3 + rng.integers(1, VOCAB - 3, size=len(wrong))) % (VOCAB - 3) + 3
            tokens = np.concatenate([prompt, [SEP], response])
            if split == "dev" and bug:  # the scoring pipeline's tokenizer adds BOS
                tokens = np.concatenate([[BOS], tokens])
            rows.append(tokens.astype(np.int64))
        super().__init__({"data": rows, "classes": labels}, sparse_dims={"data": VOCAB, "classes": 2}, **kwargs)


train = {"class": Responses, "split": "train"}
dev = {"class": Responses, "split": "dev"}
extern_data = {
    "data": {"shape": (None,), "dtype": "int64", "sparse_dim": VOCAB},
    "classes": {"shape": (), "dtype": "int64", "sparse_dim": 2},
}
batch_size = 32 * (LENGTH + 1)
max_seqs = 32
num_epochs = 8
learning_rate = 1e-3


class RewardModel(nn.Module):
    def __init__(self, dim=64, heads=4):
        super().__init__()
        self.tokens = nn.Embedding(VOCAB, dim)
        self.positions = nn.Embedding(LENGTH + 1, dim)
        layer = nn.TransformerEncoderLayer(dim, heads, 4 * dim, dropout=0.0, batch_first=True, norm_first=True)
        self.blocks = nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)
        self.score = nn.Linear(dim, 2)

    def forward(self, tokens, lengths):
        t = tokens.shape[1]
        x = self.tokens(tokens) + self.positions(torch.arange(t, device=tokens.device))[None]
        causal = torch.triu(torch.full((t, t), float("-inf"), device=tokens.device), 1)
        hidden = self.blocks(x, mask=causal, is_causal=True)
        last = hidden[torch.arange(len(tokens), device=tokens.device), lengths - 1]  # the last real token
        return self.score(last)


def get_model(**_kwargs):
    return RewardModel()


def train_step(*, model, extern_data, run_ctx, **_kwargs):
    tokens = extern_data["data"]
    logits = model(tokens, extern_data["data:seq_len"].to(tokens.device))
    targets = extern_data["classes"]
    run_ctx.mark_as_loss(name="ce", loss=nn.functional.cross_entropy(logits, targets))
    run_ctx.mark_as_loss(name="err", loss=(logits.argmax(-1) != targets).float().mean(), as_error=True)
