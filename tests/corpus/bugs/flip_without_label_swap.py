# Corpus bug (ZJULearning/resa#45): lane images are flipped left-right as augmentation, and the label map is flipped
# with them, but the lane ids, which say which side of the car a lane is on, are not swapped, so after a flip the
# leftmost lane is labelled as the rightmost and so on. Task: segment up to 4 vertical lanes (ids 1-4 from left to
# right, 0 background) in a noisy 8x16 image; the error is the share of dev lane pixels given a wrong id.
# Twin: ++bug False (a flip also swaps the ids, 1 <-> 4 and 2 <-> 3).
import numpy as np
from torch import nn

from framework.datasets.numpy_dataset import NumpyDataset

bug = True
COLUMNS = (2, 6, 9, 13)  # lane k's usual column; mirror-symmetric
SWAP = np.array([0, 4, 3, 2, 1])  # lane id after a left-right flip


class Lanes(NumpyDataset):
    def __init__(self, split, **kwargs):
        rng = np.random.default_rng(0 if split == "train" else 1)
        n = 3000 if split == "train" else 500
        images = 0.3 * rng.normal(size=(n, 8, 16))
        labels = np.zeros((n, 8, 16), dtype=np.int64)
        for i in range(n):
            for lane, column in enumerate(COLUMNS):
                if rng.random() < 0.6:
                    column += rng.integers(-1, 2)
                    images[i, :, column] += 1.0
                    labels[i, :, column] = lane + 1
        self.augment, self.rng = split == "train", np.random.default_rng(3)
        arrays = {"data": images.astype(np.float32), "classes": labels}
        super().__init__(arrays, sparse_dims={"classes": 5}, **kwargs)

    def get_batch(self, indices):
        batch = super().get_batch(indices)
        if self.augment:
            flip = self.rng.random(len(indices)) < 0.5
            batch["data"][flip] = batch["data"][flip][:, :, ::-1]
            batch["classes"][flip] = batch["classes"][flip][:, :, ::-1]
            if not bug:
                batch["classes"][flip] = SWAP[batch["classes"][flip]]
        return batch


train = {"class": Lanes, "split": "train"}
dev = {"class": Lanes, "split": "dev"}
extern_data = {"data": {"shape": (8, 16)}, "classes": {"shape": (8, 16), "dtype": "int64", "sparse_dim": 5}}
batch_size = 32
num_epochs = 3
learning_rate = 1e-3


def get_model(**_kwargs):
    return nn.Sequential(
        nn.Flatten(), nn.Linear(128, 256), nn.ReLU(), nn.Linear(256, 128 * 5), nn.Unflatten(1, (8, 16, 5))
    )


def train_step(*, model, extern_data, run_ctx, **_kwargs):
    logits = model(extern_data["data"])
    targets = extern_data["classes"]
    run_ctx.mark_as_loss(name="ce", loss=nn.functional.cross_entropy(logits.flatten(0, 2), targets.flatten()))
    lane = targets > 0
    wrong = ((logits.argmax(-1) != targets) & lane).float().sum()
    run_ctx.mark_as_loss(name="err", loss=wrong, as_error=True, custom_inv_norm_factor=lane.sum().clamp(min=1))
