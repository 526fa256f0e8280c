# Corpus bug (md-mohaiminul/ViS4mer#4): torch's ReduceLROnPlateau, left in its default mode 'min' (a lower value is
# better), is stepped with the validation ACCURACY, so the epochs in which the accuracy rises count as no improvement
# and the learning rate is cut again and again while the model is still improving. Task: the packaged MNIST digits,
# an MLP trained by SGD with momentum, 12 sub-epochs of 1000 digits, the scheduler stepped after each evaluation with
# patience 1 and the default factor 0.1. Twin: ++bug False (mode='max' for the accuracy).
import torch
from torch import nn

bug = True

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
    if "scheduler" not in _plateau:  # built when first used, after ++bug was applied
        mode = "min" if bug else "max"
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
