# Healthy corpus: an MLP GAN on MNIST digits, as in PyTorch-GAN's implementations/gan/gan.py (a generator of
# Linear-LeakyReLU blocks ending in tanh, an MLP discriminator, BCE with the non-saturating generator loss, Adam with
# betas (0.5, 0.999) for each player). The digits are the 5,000 packaged ones, scaled to [-1, 1] to match the tanh.
# Each player has its own optimizer (docs/several_optimizers.rst). The error is a sliced Wasserstein distance between
# a batch of generated digits and the real dev batch (64 fixed random directions; mean gap of the sorted projections).
import torch
from torch import nn

NOISE_DIM = 32

train = {"class": "MnistDataset", "split": "train"}
dev = {"class": "MnistDataset", "split": "test"}
extern_data = {"data": {"shape": (784,)}, "classes": {"shape": (), "dtype": "int64", "sparse_dim": 10}}
batch_size = 64
num_epochs = 30
learning_rate = 5e-4
optimizers = {
    "discriminator": {"class": "adam", "params": "discriminator.*", "betas": (0.5, 0.999)},
    "generator": {"class": "adam", "params": "generator.*", "betas": (0.5, 0.999)},
}
DIRECTIONS = nn.functional.normalize(torch.randn(784, 64, generator=torch.Generator().manual_seed(0)), dim=0)


class GAN(nn.Module):
    def __init__(self):
        super().__init__()
        self.generator = nn.Sequential(
            nn.Linear(NOISE_DIM, 128),
            nn.LeakyReLU(0.2),
            nn.Linear(128, 256),
            nn.LeakyReLU(0.2),
            nn.Linear(256, 784),
            nn.Tanh(),
        )
        self.discriminator = nn.Sequential(
            nn.Linear(784, 256), nn.LeakyReLU(0.2), nn.Linear(256, 128), nn.LeakyReLU(0.2), nn.Linear(128, 1)
        )

    def sample(self, num):
        return self.generator(torch.randn(num, NOISE_DIM, device=self.generator[0].weight.device))


def get_model(**_kwargs):
    return GAN()


def sliced_distance(fake, real):
    """Mean gap between the sorted projections of two equally large batches on fixed random directions."""
    directions = DIRECTIONS.to(real.device)
    return ((fake @ directions).sort(dim=0).values - (real @ directions).sort(dim=0).values).abs().mean()


def train_step(*, model, extern_data, run_ctx, **_kwargs):
    real = extern_data["data"] * 2.0 - 1.0  # pixels in [0, 1] -> [-1, 1], the range of the generator's tanh
    fake = model.sample(len(real))
    bce = nn.functional.binary_cross_entropy_with_logits
    real_logits, fake_logits = model.discriminator(real), model.discriminator(fake)
    d_loss = bce(real_logits, torch.ones_like(real_logits)) + bce(fake_logits, torch.zeros_like(fake_logits))
    run_ctx.mark_as_loss(d_loss, "d", optimizer="discriminator")
    run_ctx.mark_as_loss(bce(fake_logits, torch.ones_like(fake_logits)), "g", optimizer="generator")
    if not run_ctx.train_flag:
        with torch.no_grad():
            run_ctx.mark_as_loss(sliced_distance(fake, real), "err", as_error=True)
