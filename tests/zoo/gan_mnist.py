# Library zoo: the vanilla MLP GAN of many tutorials (PyTorch-GAN's gan.py, the DCGAN tutorial's losses) on the
# packaged MNIST digits scaled to [-1, 1]: the discriminator sees fake.detach(), the generator the non-saturating
# loss (BCE against "real" labels).
import torch
from torch import nn

train = {"class": "MnistDataset", "split": "train"}
extern_data = {"data": {"shape": (784,)}, "classes": {"shape": (), "dtype": "int64", "sparse_dim": 10}}
batch_size = 64
num_epochs = 5
learning_rate = 2e-4
optimizers = {
    "discriminator": {"class": "adam", "params": "discriminator.*", "betas": (0.5, 0.999)},
    "generator": {"class": "adam", "params": "generator.*", "betas": (0.5, 0.999)},
}
log_verbosity = 4
report_html = False
NZ = 64


class GAN(nn.Module):
    def __init__(self):
        super().__init__()
        self.generator = nn.Sequential(nn.Linear(NZ, 256), nn.LeakyReLU(0.2), nn.Linear(256, 784), nn.Tanh())
        self.discriminator = nn.Sequential(nn.Linear(784, 256), nn.LeakyReLU(0.2), nn.Linear(256, 1))


def get_model(**_kwargs):
    return GAN()


def noise(n, device):
    return torch.randn(n, NZ, device=device)


def train_step(*, model, extern_data, run_ctx, **_kwargs):
    real = extern_data["data"] * 2 - 1
    fake = model.generator(noise(len(real), real.device))
    bce = nn.functional.binary_cross_entropy_with_logits
    real_logits, fake_logits = model.discriminator(real), model.discriminator(fake.detach())
    d_loss = bce(real_logits, torch.ones_like(real_logits)) + bce(fake_logits, torch.zeros_like(fake_logits))
    run_ctx.mark_as_loss(d_loss, "d", optimizer="discriminator")
    g_logits = model.discriminator(fake)
    run_ctx.mark_as_loss(bce(g_logits, torch.ones_like(g_logits)), "g", optimizer="generator")
