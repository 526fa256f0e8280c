# A variational autoencoder on MNIST: the DTU MLOps debugging exercise's model, as a config.
#
#   python rnn.py configs/vae_mnist.py
#
# Encoder 784 -> 400 -> (mean, log-variance) of a 20-dim latent; decoder 20 -> 400 -> 784 pixel
# probabilities. Loss per image: reconstruction (binary cross-entropy, summed over pixels) plus the
# KL divergence to N(0, I), marked separately so that both show in the logs. At the end it writes
# output/vae_mnist/orig_data.png (dev digits), reconstructions.png (the same digits through the
# VAE) and generated_samples.png (decoded draws from the prior), and logs them to TensorBoard
# (tensorboard --logdir output/vae_mnist/tensorboard); a planted bug's run writes to
# output/vae_mnist+<bug>. About 20 seconds on a laptop CPU.
#
# configs/vae_bugs/ plants the exercise's bug classes (device, shape, math, training), one file
# each, loaded after this one:  python rnn.py configs/vae_mnist.py configs/vae_bugs/shape.py
# docs/walkthrough_vae.rst walks through which flag or tool catches each.
import os

import torch
from torch import nn

from framework import run_output_dir
from framework.base.log import v3 as log_v3  # not 'log': that is the option naming the log files
from framework.images import save_image_grid

output_dir = run_output_dir()  # output/vae_mnist; with a bug file, output/vae_mnist+<bug>
latent_dim = 20
hidden_dim = 400

task = "train"
extern_data = {"data": {"shape": (784,), "dtype": "float32"}}  # pixels in [0, 1]; no labels needed
train = {"class": "MnistDataset", "split": "train"}
dev = {"class": "MnistDataset", "split": "test"}
batch_size = 100
num_epochs = 10
optimizer = {"class": "adam"}
learning_rate = 1e-3
model = output_dir + "/model"
log = [output_dir + "/train.log"]
tensorboard_dir = output_dir + "/tensorboard"
debug_output_ranges = {"decoder": (0.0, 1.0)}  # the decoder outputs pixel probabilities


class Encoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.hidden = nn.Linear(784, hidden_dim)
        self.mean = nn.Linear(hidden_dim, latent_dim)
        self.log_var = nn.Linear(hidden_dim, latent_dim)

    def forward(self, x):
        h = torch.relu(self.hidden(x))
        mean, log_var = self.mean(h), self.log_var(h)
        return self.reparameterize(mean, log_var), mean, log_var

    def reparameterize(self, mean, log_var):
        """z = mean + std * noise, so that gradients flow to mean and log_var."""
        return mean + torch.exp(0.5 * log_var) * torch.randn_like(log_var)


class Decoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.hidden = nn.Linear(latent_dim, hidden_dim)
        self.out = nn.Linear(hidden_dim, 784)

    def forward(self, z):
        return torch.sigmoid(self.out(torch.relu(self.hidden(z))))


class VAE(nn.Module):
    def __init__(self):
        super().__init__()
        self.encoder = Encoder()
        self.decoder = Decoder()

    def forward(self, x):
        z, mean, log_var = self.encoder(x)
        return self.decoder(z), mean, log_var


def get_model(*, epoch, step, **_kwargs):
    return VAE()


def train_step(*, model, extern_data, run_ctx, **_kwargs):
    x = extern_data["data"]
    x_hat, mean, log_var = model(x)
    reconstruction = nn.functional.binary_cross_entropy(x_hat, x, reduction="sum")
    kl = -0.5 * torch.sum(1 + log_var - mean.pow(2) - log_var.exp())
    run_ctx.mark_as_loss(name="recon", loss=reconstruction, custom_inv_norm_factor=x.shape[0])
    run_ctx.mark_as_loss(name="kl", loss=kl, custom_inv_norm_factor=x.shape[0])


def write_images(state):
    """The exercise's three pictures, as PNG files and (with tensorboard_dir) in TensorBoard, after training."""
    if state.task != "train":
        return
    loader = state.loaders["dev"]
    _, batch = next(loader.iterate(loader.plan(1)[:1]))
    x = batch["data"][:64]
    state.model.eval()
    with torch.no_grad():
        reconstructions, _, _ = state.model(x)
        samples = state.model.decoder(torch.randn(64, latent_dim, device=x.device))
    names = ("orig_data", "reconstructions", "generated_samples")
    for name, images in zip(names, (x, reconstructions, samples), strict=True):
        grid = save_image_grid(images.view(-1, 28, 28), os.path.join(output_dir, name + ".png"))
        if state.summaries is not None:
            state.summaries.image(f"vae/{name}", grid, state.global_step, "CHW")
    log_v3(f"Wrote {', '.join(name + '.png' for name in names)} to {output_dir}/ (8x8 digits each)")


callbacks = {"finish": write_images}
