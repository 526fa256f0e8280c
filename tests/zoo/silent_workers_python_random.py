# Bug: a random time shift (roll) drawn from a random.Random owned by an augmentation object of the dataset.
import random

import numpy as np


class RandomRoll:
    def __init__(self, seed):
        self.random = random.Random(seed)

    def __call__(self, rows):
        return np.stack([np.roll(r, self.random.randint(0, 7)) for r in rows])


class NoisyClusters(NoisyClusters):
    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.augment = RandomRoll(seed=1234)

    def get_batch(self, indices):
        batch = super().get_batch(indices)
        batch["data"] = self.augment(batch["data"])
        return batch


train = {**train, "class": NoisyClusters}
