# Bug: noise from a torch.Generator kept by the dataset (torch's own per-worker seeding does not reach it).
import numpy as np
import torch


class NoisyClusters(NoisyClusters):
    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.generator = torch.Generator().manual_seed(7)

    def noise(self, indices, shape):
        return (0.3 * torch.randn(shape, generator=self.generator)).numpy().astype(np.float32)


train = {**train, "class": NoisyClusters}
