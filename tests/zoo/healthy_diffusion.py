# Healthy corpus (on healthy_vectors.py): a DDPM-style denoiser predicting the noise at a random time step, as the
# diffusion tutorials write it: its loss stays near the noise's variance by design.
import torch
from torch import nn

T = 100
betas = torch.linspace(1e-4, 0.02, T)
alphas_bar = torch.cumprod(1 - betas, 0)


class Denoiser(nn.Module):
    def __init__(self):
        super().__init__()
        self.time = nn.Embedding(T, 64)
        self.inp = nn.Linear(16, 64)
        self.out = nn.Sequential(nn.SiLU(), nn.Linear(64, 64), nn.SiLU(), nn.Linear(64, 16))

    def forward(self, x, t):
        return self.out(self.inp(x) + self.time(t))


def get_model(**_):
    return Denoiser()


def train_step(*, model, extern_data, run_ctx, **_):
    x0 = extern_data["data"]
    t = torch.randint(0, T, (x0.shape[0],), device=x0.device)
    noise = torch.randn_like(x0)
    ab = alphas_bar.to(x0.device)[t][:, None]
    xt = ab.sqrt() * x0 + (1 - ab).sqrt() * noise
    run_ctx.mark_as_loss(name="mse", loss=nn.functional.mse_loss(model(xt, t), noise))
