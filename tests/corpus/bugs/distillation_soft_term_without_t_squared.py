# Corpus bug (IntelLabs/distiller#122): the knowledge-distillation loss adds the KL divergence between the
# temperature-softened teacher and student outputs to the student's hard-label loss without multiplying it by T^2;
# the soft term's gradients scale as 1/T^2, so at T = 4 the teacher's signal has a sixteenth of its intended weight
# and the student learns mostly from the hard labels. Task: a small student MLP learns a 6-class problem from 800
# examples whose hard labels are 35% noisy (the teacher, a network that knows the clean rule, is kept fixed), with
# distiller's weighting 0.5 * hard + 0.5 * soft. The error is the dev error against the clean labels. Twin: ++bug
# False (the soft term times T**2).
import numpy as np
import torch
from torch import nn

from framework.datasets.numpy_dataset import NumpyDataset

bug = True
DIM, CLASSES, T = 12, 6, 4.0
W1 = torch.from_numpy(np.random.default_rng(41).normal(size=(DIM, 32)).astype(np.float32))
W2 = torch.from_numpy(np.random.default_rng(42).normal(size=(32, CLASSES)).astype(np.float32))


def teacher_logits(x):
    return 2.0 * torch.tanh(x @ W1.to(x.device)) @ W2.to(x.device) / np.sqrt(32)


class Samples(NumpyDataset):
    def __init__(self, split, **kwargs):
        rng = np.random.default_rng(0 if split == "train" else 1)
        x = rng.normal(size=(800 if split == "train" else 1000, DIM)).astype(np.float32)
        labels = teacher_logits(torch.from_numpy(x)).argmax(-1).numpy()
        if split == "train":
            noisy = rng.random(len(labels)) < 0.35
            labels = np.where(noisy, rng.integers(0, CLASSES, size=len(labels)), labels)
        super().__init__({"data": x, "classes": labels}, sparse_dims={"classes": CLASSES}, **kwargs)


train = {"class": Samples, "split": "train"}
dev = {"class": Samples, "split": "dev"}
extern_data = {"data": {"shape": (DIM,)}, "classes": {"shape": (), "dtype": "int64", "sparse_dim": CLASSES}}
batch_size = 32
num_epochs = 8
learning_rate = 3e-3


def get_model(**_kwargs):
    return nn.Sequential(nn.Linear(DIM, 256), nn.ReLU(), nn.Linear(256, 256), nn.ReLU(), nn.Linear(256, CLASSES))


def train_step(*, model, extern_data, run_ctx, **_kwargs):
    x, targets = extern_data["data"], extern_data["classes"]
    logits = model(x)
    hard = nn.functional.cross_entropy(logits, targets)
    soft = nn.functional.kl_div(
        nn.functional.log_softmax(logits / T, dim=-1),
        nn.functional.softmax(teacher_logits(x) / T, dim=-1),
        reduction="batchmean",
    )
    if not bug:
        soft = soft * T**2
    run_ctx.mark_as_loss(name="hard", loss=0.5 * hard)
    run_ctx.mark_as_loss(name="distill", loss=0.5 * soft)
    if not model.training:
        clean = teacher_logits(x).argmax(-1)
        run_ctx.mark_as_loss(name="err", loss=(logits.argmax(-1) != clean).float().mean(), as_error=True)
