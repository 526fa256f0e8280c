# Zoo healthy, over regress.py: a module of the user's own that adds input noise in training only (a regulariser):
# its code reads self.training, and evaluation is no worse than training.
import torch


class InputNoise(nn.Module):  # noqa: F821 (regress.py's)
    def forward(self, x):
        return x + 0.05 * torch.randn_like(x) if self.training else x


def get_model(**_kwargs):
    return nn.Sequential(InputNoise(), nn.Linear(1, 32), nn.Tanh(), nn.Linear(32, 1))  # noqa: F821
