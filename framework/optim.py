"""Optimizers by name and gradient clipping."""

from __future__ import annotations

from typing import Any

import torch

from framework.config import Config
from framework.errors import ConfigError
from framework.events import Callbacks, Event
from framework.util import check_kwargs, import_by_name

OPTIMIZERS = {
    "adam": torch.optim.Adam,
    "adamw": torch.optim.AdamW,
    "sgd": torch.optim.SGD,
    "rmsprop": torch.optim.RMSprop,
    "adagrad": torch.optim.Adagrad,
    "adadelta": torch.optim.Adadelta,
}

# RETURNN spells some options differently from torch.
_RETURNN_KWARG_NAMES = {"epsilon": "eps"}


def create_optimizer(config: Config, model: torch.nn.Module) -> torch.optim.Optimizer:
    """The optimizer that the ``optimizer`` option describes, at ``learning_rate``."""
    spec = config.get("optimizer")
    kwargs: dict[str, Any] = {"class": spec} if isinstance(spec, str) else dict(spec)
    name = kwargs.pop("class", None)
    if name is None:
        raise ConfigError(f"optimizer = {spec!r} has no 'class'; e.g. {{'class': 'adam', 'weight_decay': 0.01}}.")
    if callable(name):
        factory = name
    elif isinstance(name, str) and name.lower() in OPTIMIZERS:
        factory = OPTIMIZERS[name.lower()]
    elif isinstance(name, str) and "." in name:
        factory = import_by_name(name, "optimizer")
    else:
        raise ConfigError(
            f"optimizer: unknown class {name!r}; use one of {', '.join(OPTIMIZERS)}, 'module.Class' or a callable."
        )
    kwargs = {_RETURNN_KWARG_NAMES.get(k, k): v for k, v in kwargs.items()}
    if "lr" in kwargs:
        raise ConfigError("optimizer: set the learning rate with the 'learning_rate' option, not optimizer['lr'].")
    check_kwargs(factory, kwargs, "optimizer")
    params = [p for p in model.parameters() if p.requires_grad]
    if not params:
        raise ConfigError("The model from get_model has no parameters that require gradients; nothing to train.")
    return factory(params, lr=config.float("learning_rate"), **kwargs)


def install_gradient_clipping(config: Config, callbacks: Callbacks) -> None:
    """Clip gradients right before each optimizer step, as configured."""
    max_norm = config.get("gradient_clip_global_norm")
    if max_norm is not None:

        def clip_norm(engine: Any) -> None:
            engine.grad_norm = torch.nn.utils.clip_grad_norm_(engine.model.parameters(), max_norm)

        callbacks.on(Event.BEFORE_OPTIMIZER_STEP, clip_norm)
    max_value = config.get("gradient_clip")
    if max_value is not None:
        callbacks.on(
            Event.BEFORE_OPTIMIZER_STEP,
            lambda engine: torch.nn.utils.clip_grad_value_(engine.model.parameters(), max_value),
        )
