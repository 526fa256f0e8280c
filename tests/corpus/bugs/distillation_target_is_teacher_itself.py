# Corpus bug (labmlai/annotated_deep_learning_paper_implementations#66): after a refactoring, the distillation loss
# takes the KL divergence between the teacher's soft targets and the teacher's own log-probabilities (large_logits
# used twice instead of the student's output), so the term is a constant without gradient and the student learns from
# the hard labels alone. Task: 10 classes of 40-dim inputs whose hard labels are drawn from a smooth posterior (noisy
# labels, 800 training examples); the teacher is the large model trained before (fixed here, its logits close to the
# true posterior's); the student is a small MLP trained by cross-entropy plus the temperature-scaled KL toward the
# teacher. The error is the dev error against the most likely class. Twin: ++bug False (the student's log-probabilities
# as the KL input).
import numpy as np
import torch
from torch import nn

from framework.datasets.numpy_dataset import NumpyDataset

bug = True
DIM, CLASSES, TEMPERATURE, KD_WEIGHT = 40, 10, 4.0, 0.9
TRUE_W = np.random.default_rng(11).normal(size=(DIM, CLASSES)) * 0.35


class NoisyLabels(NumpyDataset):
    def __init__(self, split, **kwargs):
        rng = np.random.default_rng(0 if split == "train" else 1)
        n = 800 if split == "train" else 1000
        x = rng.normal(size=(n, DIM))
        logits = x @ TRUE_W
        if split == "train":  # the labels annotators gave: a draw from the posterior
            p = np.exp(logits - logits.max(1, keepdims=True))
            p /= p.sum(1, keepdims=True)
            labels = np.array([rng.choice(CLASSES, p=row) for row in p])
        else:  # the dev set: the most likely class
            labels = logits.argmax(1)
        super().__init__({"data": x.astype(np.float32), "classes": labels}, sparse_dims={"classes": CLASSES}, **kwargs)


train = {"class": NoisyLabels, "split": "train"}
dev = {"class": NoisyLabels, "split": "dev"}
extern_data = {"data": {"shape": (DIM,)}, "classes": {"shape": (), "dtype": "int64", "sparse_dim": CLASSES}}
batch_size = 32
num_epochs = 8
learning_rate = 1e-3


class Teacher(nn.Module):
    """The large model, trained before; its weights are loaded and fixed."""

    def __init__(self):
        super().__init__()
        self.linear = nn.Linear(DIM, CLASSES, bias=False)
        self.linear.weight.data = torch.tensor(TRUE_W.T, dtype=torch.float32)
        self.requires_grad_(False)

    def forward(self, x):
        return self.linear(x)


class Distillation(nn.Module):
    def __init__(self):
        super().__init__()
        self.teacher = Teacher()
        self.student = nn.Sequential(nn.Linear(DIM, 256), nn.ReLU(), nn.Linear(256, CLASSES))


def get_model(**_kwargs):
    return Distillation()


def train_step(*, model, extern_data, run_ctx, **_kwargs):
    x, labels = extern_data["data"], extern_data["classes"]
    output = model.student(x)
    with torch.no_grad():
        large_logits = model.teacher(x)
    soft_targets = nn.functional.softmax(large_logits / TEMPERATURE, dim=-1)
    if bug:
        soft_prob = nn.functional.log_softmax(large_logits / TEMPERATURE, dim=-1)
    else:
        soft_prob = nn.functional.log_softmax(output / TEMPERATURE, dim=-1)
    kd = nn.functional.kl_div(soft_prob, soft_targets, reduction="batchmean") * TEMPERATURE**2
    ce = nn.functional.cross_entropy(output, labels)
    run_ctx.mark_as_loss(name="ce", loss=ce, scale=1 - KD_WEIGHT)
    run_ctx.mark_as_loss(name="kd", loss=kd, scale=KD_WEIGHT)
    run_ctx.mark_as_loss(name="err", loss=(output.argmax(-1) != labels).float().mean(), as_error=True)
