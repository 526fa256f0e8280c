# Healthy corpus: a GAN on a 1-D mixture of three Gaussians with the non-saturating generator loss. The generator and
# the discriminator each have their own Adam (the 'optimizers' option, see docs/several_optimizers.rst), and neither
# player's loss falls when training goes well, by design. The error is the 1-D Wasserstein distance between a batch of
# generated samples and the real batch (the mean gap between their sorted values).
import numpy as np
import torch
from torch import nn

from framework.datasets.numpy_dataset import NumpyDataset

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


def train_step(*, model, extern_data, run_ctx, **_kwargs):
    real = extern_data["data"]
    fake = model.sample(len(real))
    bce = nn.functional.binary_cross_entropy_with_logits
    real_logits, fake_logits = model.discriminator(real), model.discriminator(fake)
    d_loss = bce(real_logits, torch.ones_like(real_logits)) + bce(fake_logits, torch.zeros_like(fake_logits))
    run_ctx.mark_as_loss(name="d", loss=d_loss, optimizer="discriminator")
    run_ctx.mark_as_loss(name="g", loss=bce(fake_logits, torch.ones_like(fake_logits)), optimizer="generator")
    with torch.no_grad():
        distance = (fake.flatten().sort().values - real.flatten().sort().values).abs().mean()
    run_ctx.mark_as_loss(name="err", loss=distance, as_error=True)
