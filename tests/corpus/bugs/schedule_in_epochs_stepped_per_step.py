# Corpus bug (crowsonkb/k-diffusion#50): a cosine schedule written in epochs is advanced by the optimizer step, so its
# whole course runs in the first few steps and the learning rate is ~0 for the rest of training. Task: 4 Gaussian
# clusters. Twin: ++bug False (the schedule reads the continuous epoch).
import math

from torch import nn

bug = True

train = {"class": "GaussianClustersDataset", "split": "train", "num_seqs": 2000, "dim": 8, "num_classes": 4}
dev = {"class": "GaussianClustersDataset", "split": "test", "num_seqs": 2000, "dim": 8, "num_classes": 4}
extern_data = {"data": {"shape": (8,)}, "classes": {"shape": (), "dtype": "int64", "sparse_dim": 4}}
batch_size = 16
num_epochs = 3
learning_rate = 3e-3


def dynamic_learning_rate(*, global_train_step, epoch_continuous, learning_rate, **_kwargs):
    progress = (global_train_step if bug else epoch_continuous) / num_epochs  # in epochs
    return learning_rate * 0.5 * (1 + math.cos(math.pi * min(progress, 1.0)))


def get_model(**_kwargs):
    return nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Linear(32, 4))


def train_step(*, model, extern_data, run_ctx, **_kwargs):
    logits = model(extern_data["data"])
    targets = extern_data["classes"]
    run_ctx.mark_as_loss(name="ce", loss=nn.functional.cross_entropy(logits, targets))
    run_ctx.mark_as_loss(name="err", loss=(logits.argmax(-1) != targets).float().mean(), as_error=True)
