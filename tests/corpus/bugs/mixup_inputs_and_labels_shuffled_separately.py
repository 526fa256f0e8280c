# Corpus bug (xudonmao/VMT#1): the mixup layer draws its mixing partners with two separate random shuffles, one for
# the inputs and one for the labels, so each mixed input is trained toward a mixture of labels of other examples than
# the ones mixed into it (after the fix, one permutation, "the performance of VMT can be further improved for almost
# all the tasks"). Task: 10-class classification of noisy feature vectors by an MLP trained with mixup (lambda from
# Beta(1, 1), soft-target cross-entropy). Twin: ++bug False (one permutation for inputs and labels).
import numpy as np
import torch
from torch import nn

from framework.datasets.numpy_dataset import NumpyDataset

bug = True
DIM, CLASSES, ALPHA = 20, 10, 1.0
CENTRES = np.random.default_rng(23).normal(size=(CLASSES, DIM))


class Features(NumpyDataset):
    def __init__(self, split, **kwargs):
        rng = np.random.default_rng(0 if split == "train" else 1)
        labels = rng.integers(0, CLASSES, size=3000 if split == "train" else 500)
        x = CENTRES[labels] + 1.6 * rng.normal(size=(len(labels), DIM))
        super().__init__({"data": x.astype(np.float32), "classes": labels}, sparse_dims={"classes": CLASSES}, **kwargs)


train = {"class": Features, "split": "train"}
dev = {"class": Features, "split": "dev"}
extern_data = {"data": {"shape": (DIM,)}, "classes": {"shape": (), "dtype": "int64", "sparse_dim": CLASSES}}
batch_size = 64
num_epochs = 5
learning_rate = 2e-3


def get_model(**_kwargs):
    return nn.Sequential(nn.Linear(DIM, 128), nn.ReLU(), nn.Linear(128, CLASSES))


def train_step(*, model, extern_data, run_ctx, **_kwargs):
    x, targets = extern_data["data"], extern_data["classes"]
    if model.training:
        y = nn.functional.one_hot(targets, CLASSES).float()
        lam = float(np.random.beta(ALPHA, ALPHA))
        perm_x = torch.randperm(x.shape[0], device=x.device)
        perm_y = torch.randperm(x.shape[0], device=x.device) if bug else perm_x  # the second random_shuffle
        logits = model(lam * x + (1 - lam) * x[perm_x])
        soft = lam * y + (1 - lam) * y[perm_y]
        run_ctx.mark_as_loss(name="ce", loss=-(soft * logits.log_softmax(-1)).sum(-1).mean())
    else:
        logits = model(x)
        run_ctx.mark_as_loss(name="ce", loss=nn.functional.cross_entropy(logits, targets))
    run_ctx.mark_as_loss(name="err", loss=(logits.argmax(-1) != targets).float().mean(), as_error=True)
