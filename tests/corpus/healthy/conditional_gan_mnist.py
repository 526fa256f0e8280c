# Healthy corpus: a conditional GAN on MNIST digits, as in PyTorch-GAN's implementations/cgan/cgan.py (Mirza and
# Osindero): the generator gets the noise concatenated with an embedding of the class, the discriminator gets the
# image concatenated with an embedding of the class; MSE adversarial losses as in that reference, Adam(0.5, 0.999)
# for each player, each its own optimizer. The fakes are generated for the labels of the real batch. The error is a
# sliced Wasserstein distance between generated and real dev digits.
import torch
from torch import nn

NOISE_DIM, CLASSES = 32, 10

train = {"class": "MnistDataset", "split": "train"}
dev = {"class": "MnistDataset", "split": "test"}
extern_data = {"data": {"shape": (784,)}, "classes": {"shape": (), "dtype": "int64", "sparse_dim": CLASSES}}
batch_size = 64
num_epochs = 30
learning_rate = 5e-4
optimizers = {
    "discriminator": {"class": "adam", "params": "discriminator.*", "betas": (0.5, 0.999)},
    "generator": {"class": "adam", "params": "generator.*", "betas": (0.5, 0.999)},
}
DIRECTIONS = nn.functional.normalize(torch.randn(784, 64, generator=torch.Generator().manual_seed(0)), dim=0)


class Generator(nn.Module):
    def __init__(self):
        super().__init__()
        self.label_embedding = nn.Embedding(CLASSES, CLASSES)
        self.net = nn.Sequential(
            nn.Linear(NOISE_DIM + CLASSES, 128),
            nn.LeakyReLU(0.2),
            nn.Linear(128, 256),
            nn.LeakyReLU(0.2),
            nn.Linear(256, 784),
            nn.Tanh(),
        )

    def forward(self, noise, labels):
        return self.net(torch.cat([noise, self.label_embedding(labels)], dim=-1))


class Discriminator(nn.Module):
    def __init__(self):
        super().__init__()
        self.label_embedding = nn.Embedding(CLASSES, CLASSES)
        self.net = nn.Sequential(
            nn.Linear(784 + CLASSES, 256), nn.LeakyReLU(0.2), nn.Linear(256, 128), nn.LeakyReLU(0.2), nn.Linear(128, 1)
        )

    def forward(self, images, labels):
        return self.net(torch.cat([images, self.label_embedding(labels)], dim=-1))


class CGAN(nn.Module):
    def __init__(self):
        super().__init__()
        self.generator, self.discriminator = Generator(), Discriminator()


def get_model(**_kwargs):
    return CGAN()


def sliced_distance(fake, real):
    directions = DIRECTIONS.to(real.device)
    return ((fake @ directions).sort(dim=0).values - (real @ directions).sort(dim=0).values).abs().mean()


def train_step(*, model, extern_data, run_ctx, **_kwargs):
    real, labels = extern_data["data"] * 2.0 - 1.0, extern_data["classes"]
    fake = model.generator(torch.randn(len(real), NOISE_DIM, device=real.device), labels)
    real_out, fake_out = model.discriminator(real, labels), model.discriminator(fake, labels)
    mse = nn.functional.mse_loss
    d_loss = 0.5 * (mse(real_out, torch.ones_like(real_out)) + mse(fake_out, torch.zeros_like(fake_out)))
    run_ctx.mark_as_loss(d_loss, "d", optimizer="discriminator")
    run_ctx.mark_as_loss(mse(fake_out, torch.ones_like(fake_out)), "g", optimizer="generator")
    if not run_ctx.train_flag:
        with torch.no_grad():
            run_ctx.mark_as_loss(sliced_distance(fake, real), "err", as_error=True)
