# Zoo bug, over classify.py: torch's ReduceLROnPlateau, left in its default mode 'min', is stepped at each epoch end
# with the dev accuracy (1 - err), so every improving epoch counts as a bad one. Twin: ++bug False (mode 'max').
import torch
from torch import nn

bug = True
train = {**train, "separation": 0.7}  # noqa: F821 - overlapping classes: the error falls over several epochs
dev = {**dev, "separation": 0.7}  # noqa: F821
num_epochs = 6
learning_rate = 3e-4
_schedulers = []


def scheduler():
    if not _schedulers:  # built when first stepped, after ++bug was applied
        factor = torch.optim.SGD([torch.zeros(1, requires_grad=True)], lr=1.0)
        _schedulers.append(torch.optim.lr_scheduler.ReduceLROnPlateau(factor, mode="min" if bug else "max", patience=0))
    return _schedulers[0]


callbacks = {"epoch_end": lambda state: scheduler().step(1 - state.eval_scores["dev"]["err"])}


def dynamic_learning_rate(*, learning_rate, **_kwargs):
    return learning_rate * (scheduler().optimizer.param_groups[0]["lr"] if _schedulers else 1.0)


def train_step(*, model, extern_data, run_ctx, **_kwargs):
    logits = model(extern_data["data"])
    targets = extern_data["classes"]
    run_ctx.mark_as_loss(name="ce", loss=nn.functional.cross_entropy(logits, targets))
    run_ctx.mark_as_loss(name="err", loss=(logits.argmax(-1) != targets).float().mean(), as_error=True)
