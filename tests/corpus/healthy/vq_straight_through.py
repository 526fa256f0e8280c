# Healthy corpus: a vector-quantised bottleneck (VQ-VAE style) on 16-dimensional cluster data: nearest-code lookup,
# the straight-through estimator, codebook and commitment losses. Codes that are never chosen get no gradient in a
# step, by design.
import torch
from torch import nn

train = {"class": "GaussianClustersDataset", "split": "train", "num_seqs": 3000, "dim": 16, "num_classes": 8}
dev = {"class": "GaussianClustersDataset", "split": "test", "num_seqs": 3000, "dim": 16, "num_classes": 8}
extern_data = {"data": {"shape": (16,)}, "classes": {"shape": (), "dtype": "int64", "sparse_dim": 8}}
batch_size = 32
num_epochs = 2
learning_rate = 2e-3
CODES, WIDTH, BETA = 16, 8, 0.25


class VqAutoencoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.encoder = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, WIDTH))
        self.codebook = nn.Embedding(CODES, WIDTH)
        self.decoder = nn.Sequential(nn.Linear(WIDTH, 32), nn.ReLU(), nn.Linear(32, 16))

    def forward(self, x):
        z = self.encoder(x)
        codes = torch.cdist(z, self.codebook.weight).argmin(-1)
        quantized = self.codebook(codes)
        straight_through = z + (quantized - z).detach()
        return self.decoder(straight_through), z, quantized


def get_model(**_kwargs):
    return VqAutoencoder()


def train_step(*, model, extern_data, run_ctx, **_kwargs):
    x = extern_data["data"]
    reconstruction, z, quantized = model(x)
    run_ctx.mark_as_loss(name="reconstruction", loss=nn.functional.mse_loss(reconstruction, x))
    run_ctx.mark_as_loss(name="codebook", loss=nn.functional.mse_loss(quantized, z.detach()))
    run_ctx.mark_as_loss(name="commitment", loss=nn.functional.mse_loss(z, quantized.detach()), scale=BETA)
