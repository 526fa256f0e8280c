# Corpus bug (SerezD/vqvae-vqgan-pytorch-lightning#3): the non-saturating discriminator loss computes its fake term as
# binary_cross_entropy_with_logits(logits_fake, target=torch.ones_like(logits_fake)), the target of the real term, so
# the discriminator is trained to call real and generated samples alike real and gives the generator no information
# about where the real data lies. Task: a GAN on a 1-D mixture of three Gaussians (MLP generator and discriminator,
# one Adam optimizer each, the non-saturating losses); the error is the 1-D Wasserstein distance between a batch of
# generated samples and the real batch (mean gap of the sorted samples). Twin: ++bug False (zeros_like for the fake
# term).
import numpy as np
import torch
from torch import nn

from framework.datasets.numpy_dataset import NumpyDataset

bug = True
MODES, WEIGHTS, STD = np.array([-2.0, 0.5, 2.5]), np.array([0.3, 0.5, 0.2]), 0.2
NOISE_DIM = 4


class Mixture(NumpyDataset):
    def __init__(self, split, **kwargs):
        rng = np.random.default_rng(0 if split == "train" else 1)
        n = 25600 if split == "train" else 2048
        x = MODES[rng.choice(len(MODES), size=n, p=WEIGHTS)] + STD * rng.normal(size=n)
        super().__init__({"data": x[:, None].astype(np.float32)}, **kwargs)


train = {"class": Mixture, "split": "train"}
dev = {"class": Mixture, "split": "dev"}
extern_data = {"data": {"shape": (1,)}}
batch_size = 128
num_epochs = 3
learning_rate = 1e-3
optimizers = {
    "discriminator": {"class": "adam", "params": "discriminator.*", "betas": (0.5, 0.999)},
    "generator": {"class": "adam", "params": "generator.*", "betas": (0.5, 0.999)},
}


class GAN(nn.Module):
    def __init__(self):
        super().__init__()
        self.generator = nn.Sequential(
            nn.Linear(NOISE_DIM, 64), nn.ReLU(), nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 1)
        )
        self.discriminator = nn.Sequential(
            nn.Linear(1, 64), nn.LeakyReLU(0.2), nn.Linear(64, 64), nn.LeakyReLU(0.2), nn.Linear(64, 1)
        )

    def sample(self, num):
        return self.generator(torch.randn(num, NOISE_DIM, device=self.generator[0].weight.device))


def get_model(**_kwargs):
    return GAN()


def discriminator_loss(logits_real, logits_fake):
    real_loss = nn.functional.binary_cross_entropy_with_logits(logits_real, target=torch.ones_like(logits_real))
    fake_target = torch.ones_like(logits_fake) if bug else torch.zeros_like(logits_fake)
    fake_loss = nn.functional.binary_cross_entropy_with_logits(logits_fake, target=fake_target)
    return (real_loss + fake_loss) / 2


def train_step(*, model, extern_data, run_ctx, **_kwargs):
    real = extern_data["data"]
    fake = model.sample(len(real))
    logits_real, logits_fake = model.discriminator(real), model.discriminator(fake.detach())
    run_ctx.mark_as_loss(name="d_loss", loss=discriminator_loss(logits_real, logits_fake), optimizer="discriminator")
    logits_gen = model.discriminator(fake)
    g_loss = nn.functional.binary_cross_entropy_with_logits(logits_gen, target=torch.ones_like(logits_gen))
    run_ctx.mark_as_loss(name="g_loss", loss=g_loss, optimizer="generator")
    with torch.no_grad():
        distance = (fake.flatten().sort().values - real.flatten().sort().values).abs().mean()
    run_ctx.mark_as_loss(name="err", loss=distance, as_error=True)
