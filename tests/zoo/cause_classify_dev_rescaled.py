# Zoo bug, over classify.py: the dev features come from a pipeline that reads them in another unit (x 10, as
# millimetres against centimetres), while train is read as generated. Twin: ++bug False (both splits alike).
from framework.datasets.synthetic import GaussianClustersDataset

bug = True


class Rescaled(GaussianClustersDataset):
    def __init__(self, split="train", **kwargs):
        super().__init__(split, **kwargs)
        if bug:
            self.arrays["data"] = self.arrays["data"] * 10.0


dev = {**dev, "class": Rescaled}  # noqa: F821
