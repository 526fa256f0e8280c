# Healthy corpus (on quadrants.py): a small VGG-style CNN with BatchNorm and dropout, SGD with momentum and
# Nesterov, label smoothing 0.1 and a cosine schedule per step, as the CIFAR training scripts write it.
import math

from torch import nn

batch_size = 16
optimizer = {"class": "sgd", "momentum": 0.9, "nesterov": True, "weight_decay": 5e-4}
learning_rate = 0.05


def dynamic_learning_rate(*, global_train_step, learning_rate, **_kwargs):
    return learning_rate * 0.5 * (1 + math.cos(math.pi * min(global_train_step, 64) / 64))


def get_model(**_kwargs):
    return nn.Sequential(
        nn.Conv2d(3, 16, 3, padding=1),
        nn.BatchNorm2d(16),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Conv2d(16, 16, 3, padding=1),
        nn.BatchNorm2d(16),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Flatten(),
        nn.Dropout(0.3),
        nn.Linear(16 * 8 * 8, 4),
    )


def train_step(*, model, extern_data, run_ctx, **_kwargs):
    logits = model(extern_data["data"])
    targets = extern_data["classes"]
    run_ctx.mark_as_loss(name="ce", loss=nn.functional.cross_entropy(logits, targets, label_smoothing=0.1))
    run_ctx.mark_as_loss(name="fer", loss=(logits.argmax(-1) != targets).float().mean(), as_error=True)
