# Healthy corpus: metric learning with the batch-hard triplet loss (Hermans et al. 2017): for each anchor the
# farthest same-class embedding and the closest other-class embedding of the batch, hinge at margin 0.3 on the
# Euclidean distances of L2-normalised embeddings; triplets already separated by the margin give zero loss and zero
# gradient. 'err' scores the embeddings by the nearest class centroid of the batch's other examples (leave-one-out).
import numpy as np
import torch
from torch import nn

from framework.datasets.numpy_dataset import NumpyDataset

DIM, CLASSES, MARGIN = 24, 10, 0.3
CENTRES = np.random.default_rng(141).normal(size=(CLASSES, DIM))


class Faces(NumpyDataset):
    def __init__(self, split, **kwargs):
        rng = np.random.default_rng(0 if split == "train" else 1)
        labels = rng.integers(0, CLASSES, size=3000 if split == "train" else 1000)
        x = np.tanh(CENTRES[labels] + 1.0 * rng.normal(size=(len(labels), DIM)))
        super().__init__({"data": x.astype(np.float32), "classes": labels}, sparse_dims={"classes": CLASSES}, **kwargs)


def batch_hard_triplet(emb, labels):
    dist = torch.cdist(emb, emb)
    same = labels[:, None] == labels[None, :]
    hardest_positive = dist.masked_fill(~same, 0.0).amax(dim=1)
    hardest_negative = dist.masked_fill(same, float("inf")).amin(dim=1)
    return torch.relu(hardest_positive - hardest_negative + MARGIN).mean()


def centroid_error(emb, labels):
    one_hot = nn.functional.one_hot(labels, CLASSES).float()
    sums, counts = one_hot.t() @ emb, one_hot.sum(0)
    others = (sums[None] - one_hot[:, :, None] * emb[:, None]) / (counts[None] - one_hot).clamp(min=1)[..., None]
    dist = (emb[:, None] - others).norm(dim=-1).masked_fill((counts[None] - one_hot) < 1, float("inf"))
    return (dist.argmin(-1) != labels).float().mean()


train = {"class": Faces, "split": "train"}
dev = {"class": Faces, "split": "dev"}
extern_data = {"data": {"shape": (DIM,)}, "classes": {"shape": (), "dtype": "int64", "sparse_dim": CLASSES}}
batch_size = 100
num_epochs = 5
learning_rate = 1e-3


def get_model(**_kwargs):
    return nn.Sequential(nn.Linear(DIM, 128), nn.ReLU(), nn.Linear(128, 32))


def train_step(*, model, extern_data, run_ctx, **_kwargs):
    emb = nn.functional.normalize(model(extern_data["data"]), dim=1)
    labels = extern_data["classes"]
    run_ctx.mark_as_loss(name="triplet", loss=batch_hard_triplet(emb, labels))
    run_ctx.mark_as_loss(name="err", loss=centroid_error(emb.detach(), labels), as_error=True)
