# Bug: Gaussian noise injection for regularisation, added in evaluation too.
import torch
from torch.nn import functional as F


class Net(Net):
    def forward(self, x):
        h = F.relu(self.norm(self.hidden(x)))
        h = h + 0.3 * torch.randn_like(h)
        return self.out(F.relu(self.mix(self.drop(h))))
