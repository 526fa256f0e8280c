# Healthy corpus: torch's ReduceLROnPlateau in mode 'max', stepped with the validation accuracy after each sub-epoch,
# so a rising accuracy counts as improvement and the rate is cut only when the accuracy stops rising (the documented
# use for a score to maximise). Task: the packaged MNIST digits, an MLP trained by SGD with momentum, 12 sub-epochs,
# patience 1 and the default factor 0.1.
import torch
from torch import nn

train = {"class": "MnistDataset", "split": "train", "partition_epoch": 4}
dev = {"class": "MnistDataset", "split": "test"}
extern_data = {"data": {"shape": (784,)}, "classes": {"shape": (), "dtype": "int64", "sparse_dim": 10}}
batch_size = 32
num_epochs = 12
optimizer = {"class": "sgd", "momentum": 0.9}
learning_rate = 0.01

# The scheduler keeps the factor on the base rate in a one-parameter optimizer of its own; the framework applies
# learning_rate * factor at every step (dynamic_learning_rate).
_factor = torch.optim.SGD([torch.zeros(1, requires_grad=True)], lr=1.0)
_plateau = {}


def _scheduler():
    if "scheduler" not in _plateau:  # built when first used
        mode = "max"
        _plateau["scheduler"] = torch.optim.lr_scheduler.ReduceLROnPlateau(_factor, mode=mode, patience=1)
    return _plateau["scheduler"]


def step_plateau(state):
    accuracy = 1 - state.eval_scores["dev"]["err"]  # the validation accuracy
    _scheduler().step(accuracy)


callbacks = {"epoch_end": step_plateau}


def dynamic_learning_rate(*, learning_rate, **_kwargs):
    return learning_rate * _factor.param_groups[0]["lr"]


def get_model(**_kwargs):
    return nn.Sequential(nn.Linear(784, 128), nn.ReLU(), nn.Linear(128, 10))


def train_step(*, model, extern_data, run_ctx, **_kwargs):
    logits = model(extern_data["data"])
    targets = extern_data["classes"]
    run_ctx.mark_as_loss(name="ce", loss=nn.functional.cross_entropy(logits, targets))
    run_ctx.mark_as_loss(name="err", loss=(logits.argmax(-1) != targets).float().mean(), as_error=True)
