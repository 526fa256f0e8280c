# Corpus bug (materialsproject/matbench#181): score_array converted the predicted probabilities of a classification
# task to labels before it computed every classification metric, ROC AUC included, so the reported 'rocauc' was the
# area under a single-threshold curve (a balanced accuracy) instead of that of the scores: 0.5 for predictions that
# ranked the examples perfectly in the example. Task: a detector for a class with 15% positives in 12-d
# overlapping Gaussians, an MLP trained with binary cross-entropy; 'err' is 1 - ROC AUC within an evaluation batch
# of 128, computed from the predictions the metric function is given. Both runs train the same model: the bug is in
# the metric. Twin: ++bug False (the AUC of the probabilities).
import numpy as np
import torch
from torch import nn

from framework.datasets.numpy_dataset import NumpyDataset

bug = True
DIM = 12
DIRECTION = np.random.default_rng(23).normal(size=DIM)
DIRECTION /= np.linalg.norm(DIRECTION)


class Detections(NumpyDataset):
    def __init__(self, split, **kwargs):
        rng = np.random.default_rng(0 if split == "train" else 1)
        n = 6000 if split == "train" else 2000
        labels = (rng.random(n) < 0.15).astype(np.int64)
        x = rng.normal(size=(n, DIM)) + 1.6 * labels[:, None] * DIRECTION
        super().__init__({"data": x.astype(np.float32), "classes": labels}, sparse_dims={"classes": 2}, **kwargs)


def roc_auc(targets, predictions):
    """The area under the ROC curve: the share of positive/negative pairs ranked right, ties counting half."""
    positive, negative = predictions[targets == 1], predictions[targets == 0]
    if not len(positive) or not len(negative):
        return None
    greater = (positive[:, None] > negative[None, :]).float().mean()
    ties = (positive[:, None] == negative[None, :]).float().mean()
    return greater + 0.5 * ties


def score(targets, probabilities):
    """The evaluation's metric function, as score_array: classification metrics from the predicted labels."""
    if bug:
        probabilities = (probabilities > 0.5).float()  # converted to labels before every metric
    return roc_auc(targets, probabilities)


train = {"class": Detections, "split": "train"}
dev = {"class": Detections, "split": "dev"}
extern_data = {"data": {"shape": (DIM,)}, "classes": {"shape": (), "dtype": "int64", "sparse_dim": 2}}
batch_size = 128
num_epochs = 3
learning_rate = 2e-3


def get_model(**_kwargs):
    return nn.Sequential(nn.Linear(DIM, 64), nn.ReLU(), nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 1))


def train_step(*, model, extern_data, run_ctx, **_kwargs):
    logits = model(extern_data["data"]).squeeze(-1)
    targets = extern_data["classes"]
    run_ctx.mark_as_loss(name="bce", loss=nn.functional.binary_cross_entropy_with_logits(logits, targets.float()))
    with torch.no_grad():
        auc = score(targets, torch.sigmoid(logits))
    if auc is not None:
        run_ctx.mark_as_loss(name="err", loss=1.0 - auc, as_error=True)
