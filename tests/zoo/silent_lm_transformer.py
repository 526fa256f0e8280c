# Zoo base: a healthy transformer language model (nn.TransformerEncoder with a causal mask, batch first),
# logits flattened to [B*T, V] against tokens[:, 1:] with the padding ignored (-100).
import torch
from torch import nn


class TransformerLM(nn.Module):
    def __init__(self, causal=True):
        super().__init__()
        self.causal = causal
        self.embed = nn.Embedding(32, 32)
        self.pos = nn.Embedding(64, 32)
        layer = nn.TransformerEncoderLayer(32, nhead=2, dim_feedforward=64, dropout=0.1, batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, num_layers=2, enable_nested_tensor=False)
        self.output = nn.Linear(32, 32)

    def forward(self, tokens):
        length = tokens.shape[1]
        x = self.embed(tokens) + self.pos(torch.arange(length, device=tokens.device))
        mask = nn.Transformer.generate_square_subsequent_mask(length, device=tokens.device) if self.causal else None
        return self.output(self.encoder(x, mask=mask, is_causal=self.causal))


def get_model(*, epoch, step, **_kwargs):
    return TransformerLM()


def train_step(*, model, extern_data, run_ctx, **_kwargs):
    tokens, lengths = extern_data["data"], extern_data["data:seq_len"]
    logits = model(tokens[:, :-1])
    targets = tokens[:, 1:].masked_fill(~real_mask(tokens, lengths)[:, 1:], -100)
    loss = nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1), ignore_index=-100)
    run_ctx.mark_as_loss(name="ce", loss=loss)
