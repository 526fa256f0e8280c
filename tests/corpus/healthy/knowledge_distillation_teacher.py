# Healthy corpus: knowledge distillation. The teacher is a fixed network built analytically (the Bayes-optimal
# classifier of the overlapping Gaussian classes), frozen with requires_grad_(False) and kept in eval mode; the
# student learns from its temperature-softened outputs (KL divergence scaled by T^2, Hinton et al.) plus the hard
# labels' cross-entropy. The teacher runs under torch.no_grad() and gets no gradient, by design.
import numpy as np
import torch
from torch import nn

from framework.datasets.numpy_dataset import NumpyDataset

MEANS = np.random.default_rng(5).normal(0, 1.0, size=(8, 16)).astype(np.float32)
NOISE, T, ALPHA = 1.0, 4.0, 0.7


class Overlapping(NumpyDataset):
    def __init__(self, split, **kwargs):
        rng = np.random.default_rng(0 if split == "train" else 1)
        labels = rng.integers(0, 8, 3000 if split == "train" else 600)
        x = MEANS[labels] + NOISE * rng.normal(size=(len(labels), 16)).astype(np.float32)
        super().__init__({"data": x, "classes": labels}, sparse_dims={"classes": 8}, **kwargs)


train = {"class": Overlapping, "split": "train"}
dev = {"class": Overlapping, "split": "dev"}
extern_data = {"data": {"shape": (16,)}, "classes": {"shape": (), "dtype": "int64", "sparse_dim": 8}}
batch_size = 32
num_epochs = 2
learning_rate = 2e-3


class Distillation(nn.Module):
    def __init__(self):
        super().__init__()
        self.student = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 8))
        self.teacher = nn.Linear(16, 8)  # log p(x | c) up to a constant: x . mu_c / s^2 - |mu_c|^2 / (2 s^2)
        with torch.no_grad():
            self.teacher.weight.copy_(torch.from_numpy(MEANS) / NOISE**2)
            self.teacher.bias.copy_(-torch.from_numpy(MEANS).pow(2).sum(-1) / (2 * NOISE**2))
        self.teacher.requires_grad_(False)

    def train(self, mode=True):
        super().train(mode)
        self.teacher.eval()
        return self


def get_model(**_kwargs):
    return Distillation()


def train_step(*, model, extern_data, run_ctx, **_kwargs):
    x, targets = extern_data["data"], extern_data["classes"]
    logits = model.student(x)
    with torch.no_grad():
        teacher_logits = model.teacher(x)
    soft = nn.functional.kl_div(
        nn.functional.log_softmax(logits / T, -1),
        nn.functional.log_softmax(teacher_logits / T, -1),
        log_target=True,
        reduction="batchmean",
    )
    run_ctx.mark_as_loss(name="kd", loss=soft, scale=ALPHA * T**2)
    run_ctx.mark_as_loss(name="ce", loss=nn.functional.cross_entropy(logits, targets), scale=1 - ALPHA)
    run_ctx.mark_as_loss(name="err", loss=(logits.argmax(-1) != targets).float().mean(), as_error=True)
    teacher_err = (teacher_logits.argmax(-1) != targets).float().mean()
    run_ctx.mark_as_loss(name="teacher_err", loss=teacher_err, as_error=True)
