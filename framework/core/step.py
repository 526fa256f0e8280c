"""Running a config's step function on a batch: the one place where train_step / forward_step are called.

Training, evaluation, forward, the verdict runs, the step shell, replays, the layer template and
``framework.testing`` all call the step function through ``call_step`` / ``run_step``, so a step
function is called the same way everywhere: inside its run context (``get_run_ctx()`` works),
with the keyword arguments it accepts (``forward_step(*, model, extern_data)`` needs no
``**kwargs``).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import torch

from framework.base.errors import ConfigError
from framework.base.util import accepted_kwargs
from framework.core.autocast import autocast_factory, precision_from_config
from framework.core.run_ctx import RunCtx

_NAMES = {"train": "train_step", "eval": "train_step", "forward": "forward_step"}
_SIGNATURE = {
    "train_step": "train_step(*, model, extern_data, run_ctx, **kwargs) marking losses with run_ctx.mark_as_loss",
    "forward_step": "forward_step(*, model, extern_data, run_ctx, **kwargs) marking outputs with run_ctx.mark_as_output",
}


def step_function(config: Any, stage: str) -> Callable[..., Any]:
    """The config's function for ``stage``: train_step for train and eval, forward_step for forward."""
    name = _NAMES[stage]
    function = config.get(name)
    if function is None:
        task = config.get("task")
        raise ConfigError(f"task={task!r} needs {_SIGNATURE[name]} in the config.")
    return function


@functools.lru_cache(maxsize=64)
def _passed(function: Callable[..., Any]) -> tuple[str, ...]:
    """Which of model, extern_data, run_ctx ``function`` takes (all of them if it has ``**kwargs``)."""
    accepted = accepted_kwargs(function)
    return tuple(n for n in ("model", "extern_data", "run_ctx") if accepted is None or n in accepted)


def call_step(function: Callable[..., Any], model: torch.nn.Module, run_ctx: RunCtx) -> Any:
    """Call a step function on ``run_ctx.batch`` within ``run_ctx``; returns what it returns."""
    values = {"model": model, "extern_data": run_ctx.batch, "run_ctx": run_ctx}
    with run_ctx, run_ctx.autocast():
        return function(**{name: values[name] for name in _passed(function)})


def run_step(
    config: Any,
    model: torch.nn.Module,
    batch: dict[str, torch.Tensor],
    stage: str,
    *,
    epoch: int = 0,
    step: int = 0,
    summaries: Any = None,
    context: type[RunCtx] = RunCtx,
) -> RunCtx:
    """Run the config's step function of ``stage`` on ``batch`` in a fresh run context (under the
    config's ``torch_amp``; ``context``: a subclass of RunCtx that observes the step); return the context."""

    device = next(iter(model.parameters()), torch.empty(0)).device
    autocast = autocast_factory(precision_from_config(config, device))
    run_ctx = context(stage=stage, epoch=epoch, step=step, batch=batch, summaries=summaries, autocast=autocast)
    call_step(step_function(config, stage), model, run_ctx)
    return run_ctx
