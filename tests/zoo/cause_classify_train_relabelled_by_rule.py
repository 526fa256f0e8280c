# Zoo bug, over classify.py: the train split's labels went through a mapping that dev's did not: the examples of class
# 1 with a positive first feature are labelled 2 in train only (a rule the model can learn, as a label map resized by
# interpolation makes at region borders). Twin: ++bug False (train labelled as dev).
import numpy as np

from framework.datasets.synthetic import GaussianClustersDataset

bug = True


class Relabelled(GaussianClustersDataset):
    def __init__(self, split="train", **kwargs):
        super().__init__(split, **kwargs)
        if bug:
            labels, data = self.arrays["classes"], self.arrays["data"]
            self.arrays["classes"] = np.where((labels == 1) & (data[:, 0] > np.median(data[labels == 1, 0])), 2, labels)


train = {**train, "class": Relabelled}  # noqa: F821
