# Healthy twin of silent_plain_list.py: nn.ModuleList registers the hidden layers.
from torch import nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.inp = nn.Linear(8, 32)
        self.hidden = nn.ModuleList(nn.Linear(32, 32) for _ in range(2))
        self.out = nn.Linear(32, 4)

    def forward(self, x):
        x = self.inp(x).relu()
        for layer in self.hidden:
            x = layer(x).relu()
        return self.out(x)


def get_model(*, epoch, step, **_kwargs):
    return Net()
