# Zoo base (data pipeline randomness): a classifier on Gaussian clusters whose train dataset adds random
# noise to each sequence as augmentation, loaded by two DataLoader workers. Healthy: the noise is drawn
# from a generator seeded per sequence and epoch. The silent_workers_* bug files redefine the dataset.
import numpy as np
from torch import nn

from framework.datasets import GaussianClustersDataset


class NoisyClusters(GaussianClustersDataset):
    """Gaussian clusters with per-sequence noise augmentation."""

    def get_seq_order(self, epoch):
        self.epoch = epoch
        return super().get_seq_order(epoch)

    def get_batch(self, indices):
        batch = super().get_batch(indices)
        batch["data"] = batch["data"] + self.noise(indices, batch["data"].shape)
        return batch

    def noise(self, indices, shape):
        rows = [
            np.random.default_rng([self.random_seed, self.epoch, int(i)]).normal(0, 0.3, shape[1:]) for i in indices
        ]
        return np.stack(rows).astype(np.float32)


train = {"class": NoisyClusters, "split": "train", "num_seqs": 256, "dim": 8, "num_classes": 4}
dev = {"class": "GaussianClustersDataset", "split": "test", "num_seqs": 256, "dim": 8, "num_classes": 4}
extern_data = {"data": {"shape": (8,)}, "classes": {"shape": (), "dtype": "int64", "sparse_dim": 4}}
torch_dataloader_opts = {"num_workers": 2}
batch_size = 32
num_epochs = 2
optimizer = {"class": "adam"}
learning_rate = 1e-2


def get_model(*, epoch, step, **_kwargs):
    return nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Linear(32, 4))


def train_step(*, model, extern_data, run_ctx, **_kwargs):
    logits = model(extern_data["data"])
    run_ctx.mark_as_loss(name="ce", loss=nn.functional.cross_entropy(logits, extern_data["classes"]))
