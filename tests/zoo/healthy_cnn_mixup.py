# Healthy corpus (on quadrants.py): the torch CIFAR tutorial's small CNN (with BatchNorm) trained with mixup
# (Zhang et al.) as the reference implementations write it: the batch is mixed with a shuffled copy of itself,
# lam ~ Beta(0.4, 0.4), and the loss mixes the two label sets. Mixing the batch is the method.
import numpy as np
import torch
from torch import nn

batch_size = 16


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, 8, 3, padding=1),
            nn.BatchNorm2d(8),
            nn.ReLU(),
            nn.MaxPool2d(2),
            nn.Conv2d(8, 16, 3, padding=1),
            nn.BatchNorm2d(16),
            nn.ReLU(),
            nn.AdaptiveAvgPool2d(2),
        )
        self.fc = nn.Linear(64, 4)

    def forward(self, x):
        return self.fc(torch.flatten(self.features(x), 1))


def get_model(**_kwargs):
    return Net()


def train_step(*, model, extern_data, run_ctx, **_kwargs):
    x, y = extern_data["data"], extern_data["classes"]
    if run_ctx.train_flag:
        lam = float(np.random.beta(0.4, 0.4))
        index = torch.randperm(x.shape[0], device=x.device)
        logits = model(lam * x + (1 - lam) * x[index])
        loss = lam * nn.functional.cross_entropy(logits, y) + (1 - lam) * nn.functional.cross_entropy(logits, y[index])
    else:
        logits = model(x)
        loss = nn.functional.cross_entropy(logits, y)
    run_ctx.mark_as_loss(name="ce", loss=loss)
    run_ctx.mark_as_loss(name="fer", loss=(logits.argmax(-1) != y).float().mean(), as_error=True)
