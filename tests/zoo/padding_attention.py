# Bug (on sequences.py): self-attention over the padded batch without a key_padding_mask, as a first
# nn.MultiheadAttention layer is often written: every real frame attends to the padded frames too.
import torch
from torch import nn

mask_padding = False


class AttentionTagger(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(9, 16)
        self.attention = nn.MultiheadAttention(16, 2, batch_first=True)
        self.lstm = nn.LSTM(16, 32, batch_first=True)
        self.output = nn.Linear(32, 2)

    def forward(self, symbols, padding=None):
        x = self.embed(symbols)
        x = x + self.attention(x, x, x, key_padding_mask=padding, need_weights=False)[0]
        return self.output(self.lstm(x)[0])


def get_model(**_kwargs):
    return AttentionTagger()


def train_step(*, model, extern_data, run_ctx, **_kwargs):
    symbols, lengths = extern_data["data"], extern_data["data:seq_len"].to(extern_data["data"].device)
    padding = torch.arange(symbols.shape[1], device=symbols.device)[None, :] >= lengths[:, None]
    logits = model(symbols, padding if mask_padding else None)
    targets = extern_data["classes"]
    mask = ~padding
    run_ctx.mark_as_loss(name="ce", loss=nn.functional.cross_entropy(logits[mask], targets[mask]))
