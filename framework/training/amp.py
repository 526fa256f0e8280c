"""Mixed precision: ``torch_amp`` (autocast) and ``grad_scaler`` (loss scaling), in RETURNN's notation.

``torch_amp = "bfloat16"`` or ``"float16"``, or ``{"dtype": ..., "grad_scaler": {...}}``, runs
every step function (train, eval, forward, replays) under ``torch.autocast``. As in RETURNN, a
gradient scaler is on whenever autocast is (``grad_scaler = None`` turns it off, a dict sets
``init_scale``, ``growth_factor``, ``backoff_factor``, ``growth_interval``).

The scaler works on the device: the loss is multiplied by the scale before backward, the
gradients are unscaled and checked for Inf/NaN before anything else looks at them (clipping,
gradient health), an overflow skips the update through ``control.skip_update_if`` (fused
optimizers skip it in their kernel) and shrinks the scale, and a run of clean steps grows it.
Skipped steps are read a step later (no host sync) and logged at verbosity 5; a scale that keeps
collapsing is a warning that replays the step and names the module where the values overflow.
"""

from __future__ import annotations

from typing import Any

import torch

from framework.base import log
from framework.base.config import Config
from framework.base.findings import Finding, report
from framework.base.host_syncs import LaggedFlag
from framework.base.options import register
from framework.check_library import sharded
from framework.check_library.precision import diagnose_step
from framework.core.autocast import amp_settings
from framework.core.events import Event, Order
from framework.core.plugin import Plugin, on
from framework.core.state import RunState

register(
    "torch_amp",
    "str | dict | None",
    None,
    "Mixed precision (RETURNN's option): 'bfloat16' or 'float16', or {'dtype': ..., 'grad_scaler': {...} or None}.",
    __name__,
)

register(
    "grad_scaler",
    "dict | str | None",
    "auto",
    "Loss scaling under torch_amp (RETURNN's option): 'auto' (on with torch_amp), None (off), or GradScaler "
    "options {'init_scale', 'growth_factor', 'backoff_factor', 'growth_interval'}.",
    __name__,
)

COLLAPSE_STEPS = 10  # consecutive skipped updates that make a collapsing scale: a warning with the culprit


CHECK = "the loss scale keeps collapsing"


class GradScaling(Plugin):
    """Dynamic loss scaling on the device, the algorithm of ``torch.amp.GradScaler``."""

    tasks = ("train",)
    order = Order.TRAINING

    def __init__(self, device: torch.device, options: dict[str, Any]):
        self.scale = torch.full((), float(options["init_scale"]), dtype=torch.float32, device=device)
        self.growth_tracker = torch.zeros((), dtype=torch.int32, device=device)
        self.growth_factor = float(options["growth_factor"])
        self.backoff_factor = float(options["backoff_factor"])
        self.growth_interval = int(options["growth_interval"])
        self.found_inf = torch.zeros((), device=device)
        self.pending: tuple[LaggedFlag, dict[str, Any]] | None = None
        self.consecutive_skips = 0

    @classmethod
    def from_config(cls, config: Config, state: RunState) -> GradScaling | None:
        dtype, options = amp_settings(config)
        return cls(state.device, options) if dtype is not None and options is not None else None

    def state_dict(self) -> dict[str, Any]:
        """Scale, growth tracker and skip count, and the latest step's overflow flag (read: its step is done),
        which the next step reports: a resumed run scales and reports as the uninterrupted one would."""
        pending = None
        if self.pending is not None:
            flag, where = self.pending
            pending = {"flags": flag.read().clone(), **where}
        return {
            "scale": self.scale.detach().clone(),
            "growth_tracker": self.growth_tracker.detach().clone(),
            "consecutive_skips": self.consecutive_skips,
            "pending": pending,
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Continue from ``state_dict``: the values are copied into this run's tensors, on its device."""
        self.scale.copy_(state["scale"])
        self.growth_tracker.copy_(state["growth_tracker"])
        self.consecutive_skips = state["consecutive_skips"]
        pending = state["pending"]
        if pending is not None:
            self.pending = (LaggedFlag(pending["flags"]), {"epoch": pending["epoch"], "step": pending["step"]})

    @on(Event.STARTUP)
    def start_scaling(self, state: RunState) -> None:
        state.control.scale_loss_by(self.scale)

    # Before clipping and every other callback at this event: they see the true gradients.
    @on(Event.BEFORE_OPTIMIZER_STEP, Order.TRAINING - 1)
    def unscale(self, state: RunState) -> None:
        params_of = getattr(state.optimizer, "params_of", None)  # several optimizers: each decides on its own
        if params_of is None:
            self.found_inf = self._unscale(list(state.model.parameters()))
            state.control.skip_update_if(self.found_inf > 0)
            return
        # As torch's GradScaler with several optimizers: one scale, which any overflow shrinks, and an update
        # skipped only for the optimizer whose gradients overflowed.
        self.found_inf = torch.zeros((), device=self.scale.device)
        for name, params in params_of.items():
            found = self._unscale(params)
            state.control.skip_optimizer_if(name, found > 0)
            self.found_inf = self.found_inf + found

    def _unscale(self, params: list[torch.nn.Parameter]) -> torch.Tensor:
        """Unscale the gradients of ``params`` in place; returns how many of their groups overflowed (on the device)."""
        found_inf = torch.zeros((), device=self.scale.device)
        inv_scale = self.scale.double().reciprocal().float()
        groups: dict[tuple[torch.device, torch.dtype], list[torch.Tensor]] = {}
        for p in params:
            if p.grad is not None:
                groups.setdefault((p.grad.device, p.grad.dtype), []).append(p.grad)
        for grads in groups.values():
            found = torch.zeros(1, device=grads[0].device)
            slices = [sharded.local(g) for g in grads]  # under FSDP, this rank's: unscaled in place
            torch._amp_foreach_non_finite_check_and_unscale_(slices, found, inv_scale.to(grads[0].device))
            found_inf = found_inf + found.to(found_inf.device).reshape(())
        # Under FSDP each rank checked its slices: all ranks skip (and scale) alike when any slice overflowed.
        return sharded.summed_over_ranks(found_inf, [g for grads in groups.values() for g in grads])

    @on(Event.AFTER_OPTIMIZER_STEP)
    def update_scale(self, state: RunState) -> None:
        previous = self.pending
        flags = torch.stack([(self.found_inf > 0).float(), self.scale])  # [skipped, scale used]
        self.pending = (LaggedFlag(flags), {"epoch": state.epoch, "step": state.step_in_epoch})
        torch._amp_update_scale_(
            self.scale,
            self.growth_tracker,
            self.found_inf.reshape(1),
            self.growth_factor,
            self.backoff_factor,
            self.growth_interval,
        )
        if previous is not None:
            self._report(state, previous)

    def _report(self, state: RunState, pending: tuple[LaggedFlag, dict[str, Any]]) -> None:
        flag, where = pending
        skipped, scale = flag.read().tolist()
        if not skipped:
            self.consecutive_skips = 0
            return
        self.consecutive_skips += 1
        log.v5(
            f"ep {where['epoch']} step {where['step']}: gradients overflowed at loss scale {scale:g}; "
            f"update skipped, scale now {scale * self.backoff_factor:g} (normal under float16 loss scaling; with several "
            f"optimizers, the updates of those whose gradients overflowed)"
        )
        if self.consecutive_skips == COLLAPSE_STEPS:
            if any(sharded.is_sharded(p) for p in state.model.parameters()):  # its replay would run one rank alone
                report(
                    Finding(
                        "warning",
                        CHECK,
                        f"{COLLAPSE_STEPS} updates in a row were skipped because the gradients overflowed (scale now "
                        f"{scale * self.backoff_factor:g}). FSDP shards the model, so the replay that names the module "
                        f"is not run: run the config in one process to have it.",
                        evidence={"skipped_in_a_row": COLLAPSE_STEPS, "scale": scale * self.backoff_factor},
                        fix="Run the config in one process to have the overflowing module named; then keep that "
                        "module in float32 or lower its values.",
                    )
                )
                return
            replayed = diagnose_step(state)
            report(
                Finding(
                    "warning",
                    CHECK,
                    f"{COLLAPSE_STEPS} updates in a row were skipped because the gradients overflowed (scale now "
                    f"{scale * self.backoff_factor:g}). Mixed precision breaks here:\n{replayed.format()}",
                    evidence={"skipped_in_a_row": COLLAPSE_STEPS, "scale": scale * self.backoff_factor},
                    fix="Keep the module the replay names in float32 (or bfloat16, which needs no loss scale), or "
                    "lower the values it computes.",
                )
            )


PLUGINS = (GradScaling,)
