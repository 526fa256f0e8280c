"""Gradient noise and clipping right before each update, in RETURNN's order: noise, then per value, then the global
norm (0 is off, as in RETURNN). With several optimizers (the ``optimizers`` option) each one's parameters are
clipped on their own, at its entry's limits where it sets them: a discriminator's large gradients do not shrink
the generator's."""

from __future__ import annotations

from typing import Any

import torch

from framework.base.config import Config
from framework.base.options import register
from framework.check_library import sharded
from framework.core.events import Event, Order
from framework.core.plugin import Plugin, on
from framework.core.store import Key
from framework.training.optimizer_set import OptimizerSet

register(
    "gradient_clip_global_norm",
    "float | None",
    None,
    "Clip gradients to this global L2 norm before each update (0: off, as in RETURNN).",
    __name__,
    range="[0, inf)",
)
register(
    "gradient_clip",
    "float | None",
    None,
    "Clip each gradient value to [-x, x] before each update (0: off, as in RETURNN).",
    __name__,
    range="[0, inf)",
)
register(
    "gradient_noise",
    "float",
    0.0,
    "Add truncated normal noise with this std to the gradients before clipping (RETURNN's option; 0: off).",
    __name__,
    range="[0, inf)",
)


GRAD_NORM: Key[tuple[int, torch.Tensor]] = Key(
    "grad_norm", "(global step, the gradients' global norm on the device; with several optimizers, of all of them)"
)


class GradientClipping(Plugin):
    """``gradient_noise``, ``gradient_clip``, ``gradient_clip_global_norm``, per optimizer where there are several.

    The global norm (before its clipping, after the per-value one) is shared as ``GRAD_NORM`` (TensorBoard logs it).
    """

    order = Order.TRAINING
    provides = (GRAD_NORM,)

    def __init__(
        self,
        max_norm: float | None,
        max_value: float | None,
        noise: float | None = None,
        parts: list[tuple[str | None, list[torch.nn.Parameter] | None, dict[str, float]]] | None = None,
    ):
        self.max_norm = max_norm
        self.max_value = max_value
        self.noise = noise
        # (optimizer name, parameters (None: the model's), their own limits) per optimizer
        self.parts = parts or [(None, None, {})]

    @classmethod
    def from_config(cls, config: Config, state: Any) -> GradientClipping | None:
        max_norm, max_value = config.get("gradient_clip_global_norm") or None, config.get("gradient_clip") or None
        noise = config.float("gradient_noise") or None
        parts = None
        if isinstance(state.optimizer, OptimizerSet):
            parts = list(state.optimizer.parts())
            if not any(limits for _, _, limits in parts) and (max_norm, max_value) == (None, None) and noise is None:
                return None
        elif (max_norm, max_value, noise) == (None, None, None):
            return None
        return cls(max_norm, max_value, noise, parts)

    @on(Event.BEFORE_OPTIMIZER_STEP)
    def clip(self, state: Any) -> None:
        norms = []
        for name, params, limits in self.parts:
            if name is not None and not state.optimizer.due(name):
                continue  # its accumulation window is open: its gradients are not complete yet
            params = list(state.model.parameters()) if params is None else params
            if self.noise is not None:
                add_gradient_noise(params, self.noise)
            max_norm = limits.get("gradient_clip_global_norm", self.max_norm) or None
            max_value = limits.get("gradient_clip", self.max_value) or None
            # RETURNN's order (returnn/torch/updater.py): per value first, then the global norm of the clipped values
            if max_value is not None:
                torch.nn.utils.clip_grad_value_(params, max_value)
            if max_norm is not None:
                # under FSDP a DTensor, replicated: no communication
                norms.append(sharded.full(torch.nn.utils.clip_grad_norm_(params, max_norm)))
        if norms:
            norm = norms[0] if len(norms) == 1 else torch.stack(norms).square().sum().sqrt()
            state.store.put(GRAD_NORM, (state.global_step, norm), by=self)


def add_gradient_noise(params: Any, std: float) -> None:
    """RETURNN's gradient noise: truncated normal noise (std ``std``, cut at 2 std) added to each gradient."""
    for param in params:
        if param.grad is not None:
            noise = torch.empty_like(param.grad)
            torch.nn.init.trunc_normal_(noise, std=std, a=-2 * std, b=2 * std)
            param.grad += noise


PLUGINS = (GradientClipping,)
