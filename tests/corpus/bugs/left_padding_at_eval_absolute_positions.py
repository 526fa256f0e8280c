# Corpus bug (akanyaani/gpt-2-tensorflow2.0#35): a GPT-2 with learned absolute position embeddings is trained on
# right-padded batches (each text starts at position 0) and evaluated on batches padded on the LEFT, with positions
# still counted from the start of the padded row (and the padding masked out of attention), so each text sits at
# positions the model never saw it at. Task: a copy language: a text of 3 to 8 symbols, a separator, the same symbols
# again; a 2-layer causal transformer LM trained on all next-token predictions; the error is the share of wrong
# predictions of the copied half. Twin: ++bug False (evaluation pads on the right, as training does).
import numpy as np
import torch
from torch import nn

from framework.datasets.numpy_dataset import NumpyDataset

bug = True
VOCAB, SEP, MAX_LEN = 12, 1, 17  # 0 pads, 1 separates, 2..11 are symbols


class CopyTexts(NumpyDataset):
    def __init__(self, split, **kwargs):
        rng = np.random.default_rng(0 if split == "train" else 1)
        texts = []
        for _ in range(4000 if split == "train" else 600):
            symbols = rng.integers(2, VOCAB, size=rng.integers(3, 9))
            texts.append(np.concatenate([symbols, [SEP], symbols]).astype(np.int64))
        super().__init__({"data": texts}, sparse_dims={"data": VOCAB}, **kwargs)


train = {"class": CopyTexts, "split": "train"}
dev = {"class": CopyTexts, "split": "dev"}
extern_data = {"data": {"shape": (None,), "dtype": "int64", "sparse_dim": VOCAB}}
batch_size = 32 * MAX_LEN
max_seqs = 32
num_epochs = 6
learning_rate = 1e-3


class Block(nn.Module):
    def __init__(self, dim, heads):
        super().__init__()
        self.heads = heads
        self.norm1, self.norm2 = nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.qkv, self.proj = nn.Linear(dim, 3 * dim), nn.Linear(dim, dim)
        self.mlp = nn.Sequential(nn.Linear(dim, 4 * dim), nn.GELU(), nn.Linear(4 * dim, dim))

    def forward(self, x, mask):
        b, t, d = x.shape
        q, k, v = self.qkv(self.norm1(x)).view(b, t, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        attended = nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=mask[:, None])
        x = x + self.proj(attended.transpose(1, 2).reshape(b, t, d))
        return x + self.mlp(self.norm2(x))


class TinyGPT(nn.Module):
    def __init__(self, dim=64, heads=4):
        super().__init__()
        self.tokens = nn.Embedding(VOCAB, dim)
        self.positions = nn.Embedding(MAX_LEN, dim)  # learned absolute positions, as GPT-2
        self.blocks = nn.ModuleList([Block(dim, heads) for _ in range(2)])
        self.norm = nn.LayerNorm(dim)
        self.out = nn.Linear(dim, VOCAB)

    def forward(self, tokens, real):  # real: [B, T] True where a token is not padding
        length = tokens.shape[1]
        positions = torch.arange(length, device=tokens.device)  # counted from the start of the padded row
        x = self.tokens(tokens) + self.positions(positions)[None]
        causal = torch.ones(length, length, dtype=torch.bool, device=tokens.device).tril()
        allowed = causal[None] & real[:, None, :]  # [B, T, T]
        mask = torch.zeros(allowed.shape, device=tokens.device).masked_fill(~allowed, -1e9)  # as GPT-2: -1e9 added
        for block in self.blocks:
            x = block(x, mask)
        return self.out(self.norm(x))


def get_model(**_kwargs):
    return TinyGPT()


def left_padded(tokens, lengths):
    """The evaluation batches: the same texts, padded on the left."""
    shifted = torch.zeros_like(tokens)
    for i, n in enumerate(lengths.tolist()):
        shifted[i, tokens.shape[1] - n :] = tokens[i, :n]
    return shifted


def train_step(*, model, extern_data, run_ctx, **_kwargs):
    tokens, lengths = extern_data["data"], extern_data["data:seq_len"].to(extern_data["data"].device)
    if bug and not run_ctx.train_flag:
        tokens = left_padded(tokens, lengths)
        real = torch.arange(tokens.shape[1], device=tokens.device)[None] >= (tokens.shape[1] - lengths)[:, None]
    else:
        real = torch.arange(tokens.shape[1], device=tokens.device)[None] < lengths[:, None]
    logits = model(tokens[:, :-1], real[:, :-1])
    targets, predicted = tokens[:, 1:], real[:, 1:] & real[:, :-1]
    after_sep = (torch.cumsum((tokens == SEP).long(), 1)[:, :-1] > 0) & predicted  # the copied half's predictions
    ce = nn.functional.cross_entropy(logits[predicted], targets[predicted])
    run_ctx.mark_as_loss(name="ce", loss=ce)
    wrong = (logits.argmax(-1) != targets) & after_sep
    run_ctx.mark_as_loss(name="err", loss=wrong.sum().float(), as_error=True, custom_inv_norm_factor=after_sep.sum())
