# Zoo bug, over classify.py: the dev features come from a pipeline that reads them in another unit (degrees Celsius
# against train's Fahrenheit: a scale and an offset per feature), while train is read as generated. Twin: ++bug False
# (both splits alike). With ++normalised_inside True the model standardises each example first: dev read in another
# unit (x 10) then costs it nothing, and the split comparison says so in a note.
from torch import nn

from framework.datasets.synthetic import GaussianClustersDataset

bug = True
normalised_inside = False


class Rescaled(GaussianClustersDataset):
    def __init__(self, split="train", **kwargs):
        super().__init__(split, **kwargs)
        if bug:
            x = self.arrays["data"]
            self.arrays["data"] = (x * 10.0 if normalised_inside else (x - 32.0) * 5.0 / 9.0).astype(x.dtype)


def get_model(*, epoch, step, **_kwargs):
    layers = [nn.Linear(8, 32), nn.ReLU(), nn.Linear(32, 4)]
    return nn.Sequential(*([nn.LayerNorm(8, elementwise_affine=False)] if normalised_inside else []), *layers)


dev = {**dev, "class": Rescaled}  # noqa: F821
