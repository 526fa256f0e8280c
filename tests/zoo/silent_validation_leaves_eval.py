# Bug: a validation every 10 steps, in a step_end callback, switches the model to eval mode and does not switch it
# back, so the rest of each epoch trains without dropout and with batch norm frozen (++restore True: the fix).
import torch
from torch import nn

restore = False
freeze_norm_each_epoch = False  # intended: batch norm frozen for whole epochs, in an epoch_start callback


def get_model(*, epoch, step, **_kwargs):
    return nn.Sequential(nn.Linear(8, 32), nn.BatchNorm1d(32), nn.ReLU(), nn.Dropout(0.3), nn.Linear(32, 4))


def validate(state):
    if state.global_step % 10:
        return
    state.model.eval()
    with torch.no_grad():
        state.model(torch.zeros(2, 8))
    if restore:
        state.model.train()


def freeze_norm(state):
    if freeze_norm_each_epoch:
        state.model[1].eval()


callbacks = {"step_end": validate, "epoch_start": freeze_norm}
