# Healthy corpus: distillation from a teacher that knows the rule behind noisy labels (Hinton et al.'s recipe, as
# label-noise papers use it): the student's loss mixes the cross-entropy on the noisy labels with KL(teacher ||
# student) at temperature T (times T^2), and its error is measured against the teacher's decisions, the clean rule,
# not against the labels it is trained on.
import numpy as np
import torch
from torch import nn

from framework.datasets.numpy_dataset import NumpyDataset

DIM, CLASSES, T = 8, 4, 2.0
RULE = torch.from_numpy(np.random.default_rng(3).normal(size=(DIM, CLASSES)).astype(np.float32))


def teacher_logits(x):
    return 3.0 * x @ RULE.to(x.device)


class Noisy(NumpyDataset):
    def __init__(self, split, **kwargs):
        rng = np.random.default_rng(0 if split == "train" else 1)
        x = rng.normal(size=(600 if split == "train" else 300, DIM)).astype(np.float32)
        labels = teacher_logits(torch.from_numpy(x)).argmax(-1).numpy()
        noisy = rng.random(len(labels)) < 0.3  # the annotators' mistakes, in both splits
        labels = np.where(noisy, rng.integers(0, CLASSES, size=len(labels)), labels)
        super().__init__({"data": x, "classes": labels}, sparse_dims={"classes": CLASSES}, **kwargs)


train = {"class": Noisy, "split": "train"}
dev = {"class": Noisy, "split": "dev"}
extern_data = {"data": {"shape": (DIM,)}, "classes": {"shape": (), "dtype": "int64", "sparse_dim": CLASSES}}
batch_size = 32
num_epochs = 2
learning_rate = 3e-3


def get_model(**_kwargs):
    return nn.Sequential(nn.Linear(DIM, 64), nn.ReLU(), nn.Linear(64, CLASSES))


def train_step(*, model, extern_data, run_ctx, **_kwargs):
    x, labels = extern_data["data"], extern_data["classes"]
    logits, teacher = model(x), teacher_logits(x)
    soft = nn.functional.kl_div(
        nn.functional.log_softmax(logits / T, dim=-1), nn.functional.softmax(teacher / T, dim=-1), reduction="batchmean"
    )
    run_ctx.mark_as_loss(name="ce", loss=nn.functional.cross_entropy(logits, labels), scale=0.5)
    run_ctx.mark_as_loss(name="kd", loss=soft * T**2, scale=0.5)
    wrong = (logits.argmax(-1) != teacher.argmax(-1)).float().mean()  # against the clean rule
    run_ctx.mark_as_loss(name="err", loss=wrong, as_error=True)
