"""Optimizers by name, an update that a device-side flag can skip, and gradient clipping."""

from __future__ import annotations

from typing import Any

import torch

from framework.config import Config
from framework.core.events import Event, Order
from framework.core.plugin import Plugin, on
from framework.core.store import Key
from framework.errors import ConfigError
from framework.inspection import sharded
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
    params = trainable_parameters(model)
    lr = config.float("learning_rate")
    if factory in OPTIMIZERS.values() and not {"fused", "foreach", "differentiable"} & set(kwargs):
        try:  # torch's fused kernels: faster, and they skip an update on a device flag without a host sync
            return factory(params, lr=lr, fused=True, **kwargs)
        except (RuntimeError, ValueError, TypeError):  # no fused kernel for this class, device or dtype
            pass
    return factory(params, lr=lr, **kwargs)


def trainable_parameters(model: torch.nn.Module) -> list[torch.nn.Parameter]:
    """The parameters of ``model`` that require gradients; ConfigError when there are none."""
    params = [p for p in model.parameters() if p.requires_grad]
    if not params:
        raise ConfigError(
            "The model from get_model has no parameters that require gradients; nothing to train. (Modules kept in "
            "a plain list or dict are not registered: use nn.ModuleList / nn.ModuleDict.)"
        )
    return params


def step_unless(optimizer: torch.optim.Optimizer, skip: torch.Tensor | None) -> None:
    """``optimizer.step()``, skipped where the device flag ``skip`` is true.

    Fused optimizers take the flag the way ``torch.amp.GradScaler`` hands it to them (``found_inf``):
    the kernel skips the update on the device, no host sync. Any other optimizer reads the flag first.
    """
    if skip is None:
        optimizer.step()
    elif getattr(optimizer, "_step_supports_amp_scaling", False):
        converted = skip.dtype != torch.float32 or skip.dim() != 0  # a 1.0/0.0 float32 flag goes as it is
        optimizer.found_inf = skip.to(torch.float32).reshape(()) if converted else skip
        try:
            optimizer.step()
        finally:
            del optimizer.found_inf
    elif not bool(skip):  # one host sync: the flag decides on the host
        optimizer.step()


GRAD_NORM: Key[tuple[int, torch.Tensor]] = Key("grad_norm", "(global step, the gradients' global norm on the device)")


class GradientClipping(Plugin):
    """``gradient_clip_global_norm`` / ``gradient_clip``: clip the gradients right before each update.

    The global norm (before clipping) is shared as ``GRAD_NORM`` (TensorBoard logs it).
    """

    order = Order.TRAINING
    provides = (GRAD_NORM,)

    def __init__(self, max_norm: float | None, max_value: float | None):
        self.max_norm = max_norm
        self.max_value = max_value

    @classmethod
    def from_config(cls, config: Config, state: Any) -> GradientClipping | None:
        max_norm, max_value = config.get("gradient_clip_global_norm"), config.get("gradient_clip")
        return cls(max_norm, max_value) if max_norm is not None or max_value is not None else None

    @on(Event.BEFORE_OPTIMIZER_STEP)
    def clip(self, state: Any) -> None:
        if self.max_norm is not None:
            norm = torch.nn.utils.clip_grad_norm_(state.model.parameters(), self.max_norm)
            # under FSDP a DTensor, replicated: no communication
            state.store.put(GRAD_NORM, (state.global_step, sharded.full(norm)), by=self)
        if self.max_value is not None:
            torch.nn.utils.clip_grad_value_(state.model.parameters(), self.max_value)


PLUGINS = (GradientClipping,)
