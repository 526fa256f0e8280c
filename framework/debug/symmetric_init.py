"""Units that can never differ (``debug_symmetric_init``, on by default).

A layer whose output units start with the same weights and bias computes the same value in each unit
for every input; the units become different only through different gradients, which come from the
layers they feed. When those start symmetric too (``model.apply(init)`` with ``nn.init.constant_`` or
``nn.init.zeros_`` on every layer, a habit carried over from linear models), every update keeps the
units equal: the layer trains as one unit, however wide it is, and the loss stalls at what a model
that narrow can reach. A zero-initialised output layer, the last projection of a residual branch or an
adaLN-Zero modulation gets a different gradient per unit at its first update and is never reported.

At startup the layers (``nn.Linear``, ``nn.Conv1d/2d/3d``) with more than one output unit, all equal,
are found (one host read, only then). After the third update, those that changed but whose units are
still all equal are reported (one host read); without such layers nothing runs per step.
"""

from __future__ import annotations

import torch
from torch import nn

from framework.base.config import Config
from framework.base.findings import Finding, report
from framework.base.options import register
from framework.core.events import Event
from framework.core.plugin import Plugin, on
from framework.core.state import RunState

register(
    "debug_symmetric_init",
    "bool",
    True,
    "After the third update, report layers whose output units started equal and are still equal "
    "(a symmetric initialisation: the layer trains as one unit).",
    __name__,
)

CHECK = "symmetric init"
UPDATES = 3  # by then a symmetric start that the layers fed break has been broken
LAYERS = (nn.Linear, nn.Conv1d, nn.Conv2d, nn.Conv3d)


def _units_equal(layer: nn.Module) -> torch.Tensor:
    """Whether every output unit of ``layer`` has the same weights and bias (a device bool)."""
    weight = layer.weight.detach().flatten(1)
    equal = (weight == weight[:1]).all()
    if layer.bias is not None:
        equal &= (layer.bias.detach() == layer.bias.detach()[:1]).all()
    return equal


class SymmetricInit(Plugin):
    """Finds layers that start with equal units and, after the first updates, reports those still equal."""

    bug_check = ("debug_symmetric_init",)

    def __init__(self) -> None:
        self.watched: dict[str, tuple[nn.Module, torch.Tensor]] = {}  # path -> (layer, its first unit's weights)
        self.updates = 0

    @classmethod
    def from_config(cls, config: Config, state: RunState) -> SymmetricInit | None:
        sharded = state.distributed is not None and state.distributed.fsdp is not None  # a shard holds some units
        return cls() if config.bool("debug_symmetric_init") and not sharded else None

    @on(Event.STARTUP)
    def find(self, state: RunState) -> None:
        layers = [
            (path, module)
            for path, module in state.model.named_modules()
            if isinstance(module, LAYERS) and module.weight.requires_grad and module.weight.shape[0] > 1
        ]
        equal = torch.stack([_units_equal(m) for _, m in layers]).tolist() if layers else []
        self.watched = {
            path: (module, module.weight.detach().flatten(1)[0].clone())
            for (path, module), same in zip(layers, equal, strict=True)
            if same
        }
        if not self.watched:
            self.callbacks.off(Event.AFTER_OPTIMIZER_STEP, self.after_update)

    @on(Event.AFTER_OPTIMIZER_STEP)
    def after_update(self, state: RunState) -> None:
        self.updates += 1
        if self.updates < UPDATES:
            return
        self.callbacks.off(Event.AFTER_OPTIMIZER_STEP, self.after_update)
        watched = list(self.watched.items())
        stuck_flags = torch.stack(
            [_units_equal(m) & (m.weight.detach().flatten(1)[0] != first).any() for _, (m, first) in watched]
        ).tolist()
        stuck = [(path, m) for (path, (m, _)), is_stuck in zip(watched, stuck_flags, strict=True) if is_stuck]
        self.watched = {}
        if not stuck:
            return
        names = ", ".join(f"{path or '(model)'} ({type(m).__name__}, {m.weight.shape[0]} units)" for path, m in stuck)
        report(
            Finding(
                "warning",
                CHECK,
                f"the output units of {names} started with equal weights and are still equal after {UPDATES} "
                f"updates: each such layer trains as one unit. The layers they feed started symmetric too, so "
                f"every unit gets the same gradient (an initialisation with nn.init.constant_ or nn.init.zeros_ "
                f"on every layer).",
                evidence={"updates": UPDATES},
                where={"modules": [path for path, _ in stuck]},
                epoch=state.epoch,
                step=state.global_step,
                fix="Keep the layers' default initialisation (or nn.init.xavier_uniform_ / kaiming_normal_); "
                "zeros are fine for biases and for a last layer.",
                option="debug_symmetric_init = False",
            )
        )


PLUGINS = (SymmetricInit,)
