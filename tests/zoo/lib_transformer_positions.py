# Bug: learned positions indexed by a torch.arange(...) without device=, after a data-dependent
# .item() (the longest sequence of the batch), as model code often does.
import torch
from torch import nn


class PositionalEncoding(nn.Module):
    def __init__(self, d_model, max_len=512):
        super().__init__()
        self.table = nn.Embedding(max_len, d_model)

    def forward(self, x):  # [T, B, F]
        length = int(x.abs().sum(-1).gt(0).sum(0).max().item())
        positions = torch.arange(length)
        return x + self.table(positions)[:, None, :]
