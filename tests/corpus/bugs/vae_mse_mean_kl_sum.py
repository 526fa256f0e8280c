# Corpus bug (orybkin/sigma-vae-pytorch#12): the MSE VAE averages its reconstruction error over the pixels
# (size_average) while the KL term is summed over the latent dimensions, so the KL weighs hundreds of times more than
# the likelihood: the posterior collapses toward the prior and the reconstructions stay blurry. Task: a VAE with a
# 16-dim latent on the packaged MNIST digits; the error is the dev per-pixel squared error of the reconstructions from
# the posterior mean. Twin: ++bug False (the squared error summed over the 784 pixels, the KL summed over the latent
# dimensions, both averaged over the batch).
import torch
from torch import nn

bug = True
LATENT = 16

train = {"class": "MnistDataset", "split": "train"}
dev = {"class": "MnistDataset", "split": "test"}
extern_data = {"data": {"shape": (784,)}, "classes": {"shape": (), "dtype": "int64", "sparse_dim": 10}}
batch_size = 64
num_epochs = 5
learning_rate = 1e-3


class VAE(nn.Module):
    def __init__(self):
        super().__init__()
        self.encoder = nn.Sequential(nn.Linear(784, 256), nn.ReLU(), nn.Linear(256, 2 * LATENT))
        self.decoder = nn.Sequential(nn.Linear(LATENT, 256), nn.ReLU(), nn.Linear(256, 784), nn.Sigmoid())

    def forward(self, x):
        mu, logvar = self.encoder(x).chunk(2, -1)
        z = mu + torch.randn_like(mu) * (0.5 * logvar).exp() if self.training else mu
        return self.decoder(z), mu, logvar


def get_model(**_kwargs):
    return VAE()


def train_step(*, model, extern_data, run_ctx, **_kwargs):
    x = extern_data["data"]
    reconstruction, mu, logvar = model(x)
    kl = (-0.5 * (1 + logvar - mu.pow(2) - logvar.exp()).sum(-1)).mean()
    if bug:
        recon = nn.functional.mse_loss(reconstruction, x)  # size_average: the mean over pixels and batch
    else:
        recon = nn.functional.mse_loss(reconstruction, x, reduction="none").sum(-1).mean()
    run_ctx.mark_as_loss(name="recon", loss=recon)
    run_ctx.mark_as_loss(name="kl", loss=kl)
    run_ctx.mark_as_loss(name="err", loss=(reconstruction - x).pow(2).mean().detach(), as_error=True)
