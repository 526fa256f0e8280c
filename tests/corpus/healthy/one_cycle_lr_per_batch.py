# Healthy corpus: the one-cycle learning-rate policy (Smith & Topin), stepped per optimizer step over the whole run:
# the rate rises from max/25 to the maximum during the first 30% of the steps, then anneals (cosine) to max/1e4 at the
# last step, as torch.optim.lr_scheduler.OneCycleLR does. A small CNN on the packaged MNIST digits.
import math

from torch import nn

train = {"class": "MnistDataset", "split": "train"}
dev = {"class": "MnistDataset", "split": "test"}
extern_data = {"data": {"shape": (784,)}, "classes": {"shape": (), "dtype": "int64", "sparse_dim": 10}}
batch_size = 32
num_epochs = 3
learning_rate = 3e-3  # the peak (max_lr)
TOTAL_STEPS = num_epochs * math.ceil(4000 / batch_size)  # the packaged train split holds 4000 digits
PCT_START, DIV_FACTOR, FINAL_DIV_FACTOR = 0.3, 25.0, 1e4


def dynamic_learning_rate(*, global_train_step, learning_rate, **_kwargs):
    initial, final = learning_rate / DIV_FACTOR, learning_rate / DIV_FACTOR / FINAL_DIV_FACTOR
    warm = PCT_START * TOTAL_STEPS
    step = min(global_train_step, TOTAL_STEPS)
    if step <= warm:
        low, high, frac = initial, learning_rate, step / warm
    else:
        low, high, frac = learning_rate, final, (step - warm) / (TOTAL_STEPS - warm)
    return high + (low - high) * (1 + math.cos(math.pi * frac)) / 2


def get_model(**_kwargs):
    return nn.Sequential(
        nn.Unflatten(1, (1, 28, 28)),
        nn.Conv2d(1, 16, 3, stride=2),
        nn.ReLU(),
        nn.Conv2d(16, 32, 3, stride=2),
        nn.ReLU(),
        nn.Flatten(),
        nn.Linear(32 * 6 * 6, 10),
    )


def train_step(*, model, extern_data, run_ctx, **_kwargs):
    logits = model(extern_data["data"])
    targets = extern_data["classes"]
    run_ctx.mark_as_loss(name="ce", loss=nn.functional.cross_entropy(logits, targets))
    run_ctx.mark_as_loss(name="err", loss=(logits.argmax(-1) != targets).float().mean(), as_error=True)
