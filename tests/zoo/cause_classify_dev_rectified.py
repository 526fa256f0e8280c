# Zoo case, over classify.py: dev's pipeline takes the magnitude of features 4 to 7 (as a magnitude or rectification
# applied in one split only does), which no scale and offset per feature explains; train is read as generated. Twin:
# ++bug False (both splits alike). The split comparison measures how much of the gap the difference accounts for (a
# note: a domain can differ by design). With ++reads_first_half True the model reads features 0 to 3 only: the same
# difference then costs it nothing, and the note says so.
import numpy as np
from torch import nn

from framework.datasets.synthetic import GaussianClustersDataset

bug = True
reads_first_half = False


class Rectified(GaussianClustersDataset):
    def __init__(self, split="train", **kwargs):
        super().__init__(split, **kwargs)
        if bug:
            x = self.arrays["data"].copy()
            x[:, 4:] = np.abs(x[:, 4:])
            self.arrays["data"] = x


class FirstHalf(nn.Module):
    def forward(self, x):
        return x[..., :4]


def get_model(*, epoch, step, **_kwargs):
    if reads_first_half:
        return nn.Sequential(FirstHalf(), nn.Linear(4, 32), nn.ReLU(), nn.Linear(32, 4))
    return nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Linear(32, 4))


dev = {**dev, "class": Rectified}  # noqa: F821
