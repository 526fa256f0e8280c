"""A plain PyTorch VAE (no framework code): the reference implementation of configs/vae_mnist.py.

Written the way the DTU exercise names things (FC_input, FC_mean, FC_var, FC_hidden, FC_output),
so importing its parameters into the framework's model needs a name mapping. Used by
docs/comparing.rst:

    python tools/import-torch-model.py configs/vae_mnist.py --reference configs/reference/vae_reference.py:Model ...
"""

import torch
from torch import nn


class Encoder(nn.Module):
    def __init__(self, input_dim=784, hidden_dim=400, latent_dim=20):
        super().__init__()
        self.FC_input = nn.Linear(input_dim, hidden_dim)
        self.FC_mean = nn.Linear(hidden_dim, latent_dim)
        self.FC_var = nn.Linear(hidden_dim, latent_dim)

    def forward(self, x):
        h = torch.relu(self.FC_input(x))
        mean, log_var = self.FC_mean(h), self.FC_var(h)
        std = torch.exp(0.5 * log_var)
        return mean + std * torch.randn_like(log_var), mean, log_var


class Decoder(nn.Module):
    def __init__(self, latent_dim=20, hidden_dim=400, output_dim=784):
        super().__init__()
        self.FC_hidden = nn.Linear(latent_dim, hidden_dim)
        self.FC_output = nn.Linear(hidden_dim, output_dim)

    def forward(self, z):
        return torch.sigmoid(self.FC_output(torch.relu(self.FC_hidden(z))))


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.Encoder = Encoder()
        self.Decoder = Decoder()

    def forward(self, x):
        z, mean, log_var = self.Encoder(x)
        return self.Decoder(z), mean, log_var
