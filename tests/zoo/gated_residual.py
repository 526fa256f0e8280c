# Zoo (on classify.py): a healthy residual MLP whose branches start switched off in three standard
# ways: a ReZero gate initialised to 0, a zero-initialised output layer (diffusion models'
# zero_module, ControlNet's zero convolutions) and a LayerScale of 1e-5 (timm's ViT/CaiT). At step 0
# the gradient of everything inside a gated branch is zero or tiny, by design.
import torch
from torch import nn

# Classes that overlap (classify.py's are separated so well that the loss reaches 1e-5 and its noise
# dominates), so that the run stays about the gradients.
train = {
    "class": "GaussianClustersDataset",
    "split": "train",
    "num_seqs": 2000,
    "dim": 8,
    "num_classes": 4,
    "separation": 1.0,
}
dev = {
    "class": "GaussianClustersDataset",
    "split": "test",
    "num_seqs": 2000,
    "dim": 8,
    "num_classes": 4,
    "separation": 1.0,
}
num_epochs = 2


class Block(nn.Module):
    def __init__(self, dim, kind):
        super().__init__()
        self.kind = kind
        self.norm = nn.LayerNorm(dim)
        self.fc1 = nn.Linear(dim, 2 * dim)
        self.fc2 = nn.Linear(2 * dim, dim)
        if kind == "rezero":
            self.alpha = nn.Parameter(torch.zeros(1))
        elif kind == "layer_scale":
            self.gamma = nn.Parameter(torch.full((dim,), 1e-5))
        else:  # zero_module
            nn.init.zeros_(self.fc2.weight)
            nn.init.zeros_(self.fc2.bias)

    def forward(self, x):
        h = self.fc2(nn.functional.gelu(self.fc1(self.norm(x))))
        if self.kind == "rezero":
            h = self.alpha * h
        elif self.kind == "layer_scale":
            h = self.gamma * h
        return x + h


class GatedMLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.stem = nn.Linear(8, 32)
        self.blocks = nn.Sequential(Block(32, "rezero"), Block(32, "zero_module"), Block(32, "layer_scale"))
        self.head = nn.Linear(32, 4)

    def forward(self, x):
        return self.head(self.blocks(self.stem(x)))


def get_model(*, epoch, step, **_kwargs):
    return GatedMLP()
