# Bug: inputs and labels loaded from two files and shuffled separately, so labels do not belong to
# their inputs.
import numpy as np

from framework.datasets import GaussianClustersDataset

_clean = GaussianClustersDataset("train", num_seqs=2000, dim=8, num_classes=4)
_features = _clean.arrays["data"][np.random.default_rng(1).permutation(_clean.num_seqs)]
_labels = _clean.arrays["classes"][np.random.default_rng(2).permutation(_clean.num_seqs)]
train = {"class": "NumpyDataset", "arrays": {"data": _features, "classes": _labels}, "sparse_dims": {"classes": 4}}
