# Healthy corpus: semi-supervised FixMatch. 90 labelled examples (repeated in the training set, as a labelled loader
# cycles) and 2700 unlabelled ones (label -100). The unlabelled loss is the cross-entropy of the strongly augmented
# view against the argmax of the weakly augmented view, counted only where that prediction's confidence exceeds 0.95:
# early in training the mask is zero for nearly every unlabelled example, so that term is 0 and has no gradient.
import numpy as np
import torch
from torch import nn

from framework.datasets.numpy_dataset import NumpyDataset

DIM, CLASSES, LABELLED, UNLABELLED, THRESHOLD, LAMBDA_U = 16, 6, 90, 2700, 0.95, 1.0
CENTRES = np.random.default_rng(12).normal(size=(CLASSES, DIM)) * 0.9


class SemiSupervised(NumpyDataset):
    def __init__(self, split, **kwargs):
        rng = np.random.default_rng(0 if split == "train" else 1)
        n = LABELLED + UNLABELLED if split == "train" else 600
        labels = rng.integers(0, CLASSES, size=n)
        x = (CENTRES[labels] + rng.normal(size=(n, DIM))).astype(np.float32)
        if split == "train":
            labelled = np.repeat(np.arange(LABELLED), 10)
            x = np.concatenate([x[labelled], x[LABELLED:]])
            labels = np.concatenate([labels[labelled], np.full(UNLABELLED, -100)])
        super().__init__({"data": x, "classes": labels.astype(np.int64)}, sparse_dims={"classes": CLASSES}, **kwargs)


train = {"class": SemiSupervised, "split": "train"}
dev = {"class": SemiSupervised, "split": "dev"}
extern_data = {"data": {"shape": (DIM,)}, "classes": {"shape": (), "dtype": "int64", "sparse_dim": CLASSES}}
batch_size = 64
num_epochs = 4
learning_rate = 1e-3


def get_model(**_kwargs):
    return nn.Sequential(nn.Linear(DIM, 64), nn.ReLU(), nn.Linear(64, CLASSES))


def weak(x):
    return x + 0.1 * torch.randn_like(x)


def strong(x):
    return (x + 0.6 * torch.randn_like(x)) * (torch.rand_like(x) > 0.2)


def train_step(*, model, extern_data, run_ctx, **_kwargs):
    x, targets = extern_data["data"], extern_data["classes"]
    labelled = targets != -100
    if not run_ctx.train_flag:
        logits = model(x)
        run_ctx.mark_as_loss(name="ce", loss=nn.functional.cross_entropy(logits, targets))
        run_ctx.mark_as_loss(name="err", loss=(logits.argmax(-1) != targets).float().mean(), as_error=True)
        return
    logits = model(weak(x))
    supervised = nn.functional.cross_entropy(logits, targets, ignore_index=-100) if labelled.any() else logits.sum() * 0
    run_ctx.mark_as_loss(name="ce", loss=supervised)
    with torch.no_grad():
        probs = logits[~labelled].softmax(-1)
        confidence, pseudo = probs.max(-1)
        mask = (confidence >= THRESHOLD).float()
    unlabelled = nn.functional.cross_entropy(model(strong(x[~labelled])), pseudo, reduction="none")
    run_ctx.mark_as_loss(
        name="unlabelled", loss=(unlabelled * mask).mean() if len(mask) else logits.sum() * 0, scale=LAMBDA_U
    )
    wrong = (logits.argmax(-1) != targets)[labelled].float()
    run_ctx.mark_as_loss(name="err", loss=wrong.mean() if len(wrong) else wrong.sum(), as_error=True)
