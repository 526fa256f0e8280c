# Healthy corpus: a Gaussian VAE on 16-dimensional data from 4 clusters whose KL term is annealed linearly from 0 to
# 1 over the first 150 updates (the loss rises while the weight grows, by design).
import torch
from torch import nn

train = {"class": "GaussianClustersDataset", "split": "train", "num_seqs": 3000, "dim": 16, "num_classes": 4}
dev = {"class": "GaussianClustersDataset", "split": "test", "num_seqs": 3000, "dim": 16, "num_classes": 4}
extern_data = {"data": {"shape": (16,)}, "classes": {"shape": (), "dtype": "int64", "sparse_dim": 4}}
batch_size = 32
num_epochs = 2
learning_rate = 2e-3
ANNEAL_STEPS = 150


class Vae(nn.Module):
    def __init__(self):
        super().__init__()
        self.encoder = nn.Sequential(nn.Linear(16, 64), nn.ReLU(), nn.Linear(64, 4))
        self.decoder = nn.Sequential(nn.Linear(2, 64), nn.ReLU(), nn.Linear(64, 16))
        self.register_buffer("updates", torch.zeros(()))


def get_model(**_kwargs):
    return Vae()


def train_step(*, model, extern_data, run_ctx, **_kwargs):
    x = extern_data["data"]
    mean, log_variance = model.encoder(x).chunk(2, -1)
    z = mean + torch.randn_like(mean) * (0.5 * log_variance).exp() if model.training else mean
    reconstruction = nn.functional.mse_loss(model.decoder(z), x, reduction="none").sum(-1).mean()
    kl = (-0.5 * (1 + log_variance - mean**2 - log_variance.exp()).sum(-1)).mean()
    if model.training:
        model.updates += 1
    weight = min(float(model.updates) / ANNEAL_STEPS, 1.0)
    run_ctx.mark_as_loss(name="reconstruction", loss=reconstruction)
    run_ctx.mark_as_loss(name="kl", loss=kl, scale=weight)
