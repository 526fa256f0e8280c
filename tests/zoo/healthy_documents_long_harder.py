# Healthy, loaded after cause_documents_cut.py with ++cue_early True (a cut that removes nothing that decides): the
# documents longer than the cut are harder for another reason, a second, ambiguous cue early in 60% of them. Lengths
# correlated with difficulty, no information lost to the cut.
import numpy as np

from framework.datasets.numpy_dataset import NumpyDataset


class HardLongDocuments(NumpyDataset):
    def __init__(self, seed, n, **kwargs):
        rng = np.random.default_rng(seed)
        labels = rng.integers(0, CLASSES, size=n)
        docs = []
        for label in labels:
            words = rng.integers(1, FILLER + 1, size=int(rng.integers(10, 81)))
            words[rng.integers(0, 4)] = FILLER + 1 + label
            if len(words) > MAX_LEN and rng.random() < 0.6:
                words[rng.integers(4, 8)] = FILLER + 1 + int(rng.integers(0, CLASSES))
            docs.append(words[:MAX_LEN].astype(np.int64))
        super().__init__({"data": docs, "classes": labels}, sparse_dims={"data": FILLER + CLASSES + 1}, **kwargs)


train = {"class": HardLongDocuments, "seed": 0, "n": 600}
dev = {"class": HardLongDocuments, "seed": 1, "n": 240}
