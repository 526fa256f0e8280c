# Overlay on cause_eval_left_padded.py: the model keeps an EMA copy of its output layer that train_step moves in place on
# training steps (as EMA-teacher and momentum-encoder code does). The callbacks log the EMA weights after the last
# training step and when the run finishes: the symptom experiments between them must leave them as they were.
import torch
from torch import nn

from framework.base import log as framework_log  # not "log": that is the option naming the log file


class TaggerEMA(Tagger):  # noqa: F821
    def __init__(self):
        super().__init__()
        self.ema = nn.Linear(32, 2)
        self.ema.requires_grad_(False)


def get_model(**_kwargs):
    return TaggerEMA()


_plain_step = train_step  # noqa: F821


def train_step(*, model, extern_data, run_ctx, **_kwargs):
    _plain_step(model=model, extern_data=extern_data, run_ctx=run_ctx)
    if run_ctx.train_flag:
        with torch.no_grad():
            model.ema.weight.mul_(0.5).add_(model.out[2].weight, alpha=0.5)


def _ema(when):
    def record(state):
        framework_log.v1(f"EMA weights {when}: {float(state.model.ema.weight.double().sum()):.12f}")

    return record


callbacks = {"step_end": _ema("after a step"), "finish": _ema("at the end")}
