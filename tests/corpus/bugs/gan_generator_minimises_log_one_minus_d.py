# Corpus bug (llSourcell/Generative_Adversarial_networks_LIVE#5): the generator minimises the original minimax
# objective log(1 - D(G(z))) rather than maximising log D(G(z)). Early on the discriminator rejects the generated
# samples with confidence, where that loss is flat, so the generator gets almost no gradient while the discriminator
# keeps winning. Task: an MLP GAN on the packaged MNIST digits scaled to [-1, 1] (tanh generator, Adam(0.5, 0.999)
# for each player, each its own optimizer). The error is a sliced Wasserstein distance between a batch of generated
# digits and the real dev batch. Twin: ++bug False (the non-saturating loss: the fakes scored against 'real').
import torch
from torch import nn

bug = True
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
    directions = DIRECTIONS.to(real.device)
    return ((fake @ directions).sort(dim=0).values - (real @ directions).sort(dim=0).values).abs().mean()


def train_step(*, model, extern_data, run_ctx, **_kwargs):
    real = extern_data["data"] * 2.0 - 1.0
    fake = model.sample(len(real))
    real_prob, fake_prob = torch.sigmoid(model.discriminator(real)), torch.sigmoid(model.discriminator(fake))
    eps = 1e-8
    d_loss = -(torch.log(real_prob + eps).mean() + torch.log(1 - fake_prob + eps).mean())
    run_ctx.mark_as_loss(d_loss, "d", optimizer="discriminator")
    if bug:
        g_loss = torch.log(1 - fake_prob + eps).mean()  # min log(1 - D(G(z))), as in the paper's minimax game
    else:
        g_loss = -torch.log(fake_prob + eps).mean()  # max log D(G(z))
    run_ctx.mark_as_loss(g_loss, "g", optimizer="generator")
    if not run_ctx.train_flag:
        with torch.no_grad():
            run_ctx.mark_as_loss(sliced_distance(fake, real), "err", as_error=True)
