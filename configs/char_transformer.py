# A small causal transformer language model on Python's own source code.
#
#   python rnn.py configs/char_transformer.py
#
# Data: the .py files of the standard library of the Python that runs this (no download), as
# bytes; files are split into train and dev by a hash of their name, so dev is unseen code.
# The model predicts each next byte from the previous ones (a GPT in miniature: pre-norm blocks,
# causal scaled-dot-product attention, tied input/output embeddings). Reports "ce" (nats per
# byte) and "fer" (share of bytes predicted wrong). On 2 CPU cores it reaches a dev ce of about
# 1.55 (fer 0.41) in about 3 minutes, 8 epochs of 139 steps; a model that knew only how often
# each byte occurs would score 3.24. Each epoch is a 20th of the 11 MB of train code
# (partition_epoch); ++num_epochs 40 goes through all of it once.
#
# Mixed precision: torch_amp = "bfloat16" where bfloat16 matrix multiplications are native (GPUs
# since Ampere, CPUs with AVX512-BF16 or AMX). Elsewhere the CPU emulates them about 10x slower
# than float32, so the config trains in float32 there; ++torch_amp "'bfloat16'" forces it.
import math

import torch
from torch import nn

from framework import run_output_dir
from framework.core.autocast import native_bfloat16

task = "train"
device = "auto"
seq_len = 64
extern_data = {"data": {"shape": (seq_len + 1,), "dtype": "int64", "sparse_dim": 256}}
train = {"class": "CharTextDataset", "split": "train", "seq_len": seq_len, "partition_epoch": 20}
dev = {"class": "CharTextDataset", "split": "dev", "seq_len": seq_len, "max_chars": 32768}
batch_size = 64  # windows per batch
num_epochs = 8
optimizer = {"class": "adamw", "weight_decay": 0.01}
learning_rate = 5e-3
warmup_steps = 100
gradient_clip_global_norm = 1.0
torch_amp = "bfloat16" if native_bfloat16() else None
output_dir = run_output_dir()  # output/char_transformer (output/<config names>)
model = output_dir + "/model"
log = [output_dir + "/train.log"]
log_verbosity = 4

dim, heads, layers = 96, 4, 2


def dynamic_learning_rate(*, global_train_step, learning_rate, **_kwargs):
    return learning_rate * min(1.0, (global_train_step + 1) / warmup_steps)


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.attn_norm = nn.LayerNorm(dim)
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)
        self.mlp_norm = nn.LayerNorm(dim)
        self.mlp = nn.Sequential(nn.Linear(dim, 4 * dim), nn.GELU(), nn.Linear(4 * dim, dim))

    def forward(self, x):
        batch, time, _ = x.shape
        q, k, v = self.qkv(self.attn_norm(x)).view(batch, time, 3, heads, dim // heads).unbind(2)
        attended = nn.functional.scaled_dot_product_attention(
            q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), is_causal=True
        )
        x = x + self.proj(attended.transpose(1, 2).reshape(batch, time, dim))
        return x + self.mlp(self.mlp_norm(x))


class CharTransformer(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(256, dim)
        self.position = nn.Parameter(torch.randn(seq_len, dim) / math.sqrt(dim))
        self.blocks = nn.Sequential(*(Block() for _ in range(layers)))
        self.norm = nn.LayerNorm(dim)
        nn.init.normal_(self.embed.weight, std=0.02)  # tied: N(0, 1) rows would give logits of about +-10

    def forward(self, symbols):
        hidden = self.blocks(self.embed(symbols) + self.position[: symbols.shape[1]])
        return self.norm(hidden) @ self.embed.weight.t()  # logits over the 256 byte values


def get_model(*, epoch, step, **_kwargs):
    return CharTransformer()


def train_step(*, model, extern_data, run_ctx, **_kwargs):
    window = extern_data["data"]
    logits = model(window[:, :-1]).float()
    targets = window[:, 1:]
    ce = nn.functional.cross_entropy(logits.reshape(-1, 256), targets.reshape(-1), reduction="sum")
    errors = (logits.argmax(-1) != targets).sum().float()
    run_ctx.mark_as_loss(name="ce", loss=ce, custom_inv_norm_factor=targets.numel())
    run_ctx.mark_as_loss(name="fer", loss=errors, custom_inv_norm_factor=targets.numel(), as_error=True)
