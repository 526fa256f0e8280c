# On classify.py: a model that warns in its forward (warnings.warn), as user code and libraries do.
import warnings

from torch import nn

num_epochs = 1
train = {"class": "GaussianClustersDataset", "split": "train", "num_seqs": 200, "dim": 8, "num_classes": 4}
dev = {"class": "GaussianClustersDataset", "split": "test", "num_seqs": 200, "dim": 8, "num_classes": 4}


class Warns(nn.Sequential):
    def forward(self, x):
        warnings.warn("user model: inputs are not normalised", UserWarning, stacklevel=1)
        return super().forward(x)


def get_model(**_kwargs):
    return Warns(nn.Linear(8, 32), nn.ReLU(), nn.Linear(32, 4))
