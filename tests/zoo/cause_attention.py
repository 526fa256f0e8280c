# Zoo (issue 41), loaded after cause_bert.py: a healthy hand-written single-head attention classifier (the tutorial way:
# scores.masked_fill(mask, -1e9) on a boolean padding mask, mean over the real positions).
import torch
from torch import nn


class Attend(nn.Module):
    def __init__(self, vocab=32, dim=32, classes=2):
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        self.qkv = nn.Linear(dim, 3 * dim)
        self.out = nn.Linear(dim, classes)

    def forward(self, tokens, pad):
        x = self.embed(tokens)
        q, k, v = self.qkv(x).chunk(3, dim=-1)
        scores = q @ k.transpose(1, 2) / q.shape[-1] ** 0.5
        scores = scores.masked_fill(pad[:, None, :], -1e9)
        h = torch.softmax(scores, dim=-1) @ v + x
        return self.out(h[:, 0])


def get_model(*, epoch, step, **_kwargs):
    return Attend()


def padding_mask(tokens, lengths):
    return torch.arange(tokens.shape[1], device=tokens.device)[None, :] >= lengths.to(tokens.device)[:, None]


def train_step(*, model, extern_data, run_ctx, **_kwargs):
    tokens, lengths = extern_data["data"], extern_data["data:seq_len"]
    logits = model(tokens, padding_mask(tokens, lengths))
    targets = extern_data["classes"]
    run_ctx.mark_as_loss(name="ce", loss=nn.functional.cross_entropy(logits, targets))
    run_ctx.mark_as_loss(name="fer", loss=(logits.argmax(-1) != targets).float().mean(), as_error=True)
