# Healthy corpus (on sequences.py): a bag-of-embeddings autoencoder of the 12AX symbols. Each sequence becomes one
# code (the mean of its real frames' embeddings); every position is reconstructed from the code and its position.
# The target is the input by design, and every prediction reads the whole sequence.
import torch
from torch import nn


class BagAutoencoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(9, 16)
        self.position = nn.Embedding(64, 16)
        self.decode = nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 9))

    def forward(self, symbols, real):
        code = (self.embed(symbols) * real[..., None]).sum(1) / real.sum(1, keepdim=True)
        positions = self.position(torch.arange(symbols.shape[1], device=symbols.device))[None].expand(
            len(symbols), -1, -1
        )
        return self.decode(torch.cat([code[:, None].expand(-1, symbols.shape[1], -1), positions], -1))


def get_model(**_kwargs):
    return BagAutoencoder()


def train_step(*, model, extern_data, run_ctx, **_kwargs):
    symbols, lengths = extern_data["data"], extern_data["data:seq_len"]
    real = torch.arange(symbols.shape[1], device=symbols.device)[None, :] < lengths.to(symbols.device)[:, None]
    logits = model(symbols, real.float())
    run_ctx.mark_as_loss(name="recon", loss=nn.functional.cross_entropy(logits[real], symbols[real]))
