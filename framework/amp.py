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

import contextlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from framework import log
from framework.config import Config
from framework.debug.host_syncs import LaggedFlag
from framework.errors import ConfigError
from framework.events import Event, Order
from framework.options import register
from framework.plugin import Plugin, on
from framework.state import RunState

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

DTYPES = {"float16": torch.float16, "fp16": torch.float16, "half": torch.float16, "bfloat16": torch.bfloat16}
DTYPES["bf16"] = torch.bfloat16
_SCALER_DEFAULTS = {"init_scale": 2.0**16, "growth_factor": 2.0, "backoff_factor": 0.5, "growth_interval": 2000}
COLLAPSE_STEPS = 10  # consecutive skipped updates that make a collapsing scale: a warning with the culprit


@dataclass(frozen=True)
class Precision:
    """The autocast dtype of a run on ``device_type``."""

    dtype: torch.dtype
    device_type: str

    def autocast(self) -> contextlib.AbstractContextManager:
        """The ``torch.autocast`` context that step functions run in."""
        return torch.autocast(device_type=self.device_type, dtype=self.dtype)


def amp_settings(config: Config) -> tuple[torch.dtype | None, dict[str, Any] | None]:
    """``torch_amp`` and ``grad_scaler`` as (autocast dtype or None, scaler options or None)."""
    spec, scaler = config.get("torch_amp"), config.get("grad_scaler")
    if spec is None:
        return None, None
    if isinstance(spec, dict):
        unknown = set(spec) - {"dtype", "grad_scaler"}
        if unknown or "dtype" not in spec:
            raise ConfigError(
                f"torch_amp = {spec!r}: a dict needs 'dtype' and may have 'grad_scaler' (got {sorted(unknown)} "
                f"extra), e.g. {{'dtype': 'float16', 'grad_scaler': {{'init_scale': 1024}}}}."
            )
        scaler = spec.get("grad_scaler", scaler)
        spec = spec["dtype"]
    if spec not in DTYPES:
        raise ConfigError(f"torch_amp = {spec!r}: use 'bfloat16' or 'float16' (or a dict with 'dtype').")
    if scaler == "auto":
        scaler = {}
    if scaler is not None:
        if not isinstance(scaler, dict) or set(scaler) - set(_SCALER_DEFAULTS):
            raise ConfigError(
                f"grad_scaler = {scaler!r}: give None or a dict of {', '.join(_SCALER_DEFAULTS)} (GradScaler's options)."
            )
        scaler = {**_SCALER_DEFAULTS, **scaler}
    return DTYPES[spec], scaler


def uses_grad_scaler(config: Config) -> bool:
    """Whether the run scales its loss (``torch_amp`` with a ``grad_scaler``)."""
    return amp_settings(config)[1] is not None


def precision_from_config(config: Config, device: torch.device) -> Precision | None:
    """The run's autocast precision, or None without ``torch_amp``."""
    dtype, _ = amp_settings(config)
    if dtype is None or device.type == "meta":  # dry runs on the meta device check shapes and devices, not precision
        return None
    if device.type == "cpu" and dtype == torch.float16 and not _cpu_autocast_supports(torch.float16):
        raise ConfigError(
            "torch_amp = 'float16' is not supported by autocast on the CPU in this torch; use 'bfloat16'."
        )
    return Precision(dtype, device.type)


def warn_if_emulated(precision: Precision | None) -> None:
    """At startup: a warning when bfloat16 autocast runs on a CPU that emulates it (about 10x slower)."""
    if precision is not None and precision.device_type == "cpu" and precision.dtype == torch.bfloat16:
        if not native_bfloat16("cpu"):
            log.v2(
                "WARNING torch_amp = 'bfloat16' on a CPU without AVX512-BF16 or AMX: bfloat16 matrix multiplications "
                "are emulated there, about 10x slower than float32. Leave torch_amp out on this machine "
                "(framework.amp.native_bfloat16() tells in a config), or keep it to test mixed precision."
            )


def native_bfloat16(device: str | torch.device | None = None) -> bool:
    """Whether ``device`` multiplies bfloat16 matrices natively, so that ``torch_amp = "bfloat16"`` saves time.

    True on CUDA GPUs with bfloat16 support (Ampere and later) and on CPUs with AVX512-BF16 or
    AMX. Other CPUs emulate bfloat16 matrix multiplications, about 10x slower than float32.
    None: the device that ``device = "auto"`` picks (CUDA if available, else the CPU).
    """
    device_type = torch.device(device).type if device is not None else None
    if device_type == "cuda" or (device_type is None and torch.cuda.is_available()):
        return torch.cuda.is_available() and torch.cuda.is_bf16_supported(including_emulation=False)
    if device_type not in (None, "cpu"):
        return False
    try:
        return bool(torch.ops.mkldnn._is_mkldnn_bf16_supported())
    except (AttributeError, RuntimeError):  # a torch without oneDNN: no fast bfloat16 kernels either
        return False


def _cpu_autocast_supports(dtype: torch.dtype) -> bool:
    try:
        with torch.autocast("cpu", dtype=dtype):
            return True
    except (RuntimeError, ValueError):
        return False


def autocast_factory(precision: Precision | None) -> Callable[[], contextlib.AbstractContextManager]:
    """What a run context enters around the step function: autocast, or nothing."""
    return precision.autocast if precision is not None else contextlib.nullcontext


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

    @on(Event.STARTUP)
    def start_scaling(self, state: RunState) -> None:
        state.loss_scale = self.scale

    # Before clipping and every other callback at this event: they see the true gradients.
    @on(Event.BEFORE_OPTIMIZER_STEP, Order.TRAINING - 1)
    def unscale(self, state: RunState) -> None:
        self.found_inf = torch.zeros((), device=self.scale.device)
        inv_scale = self.scale.double().reciprocal().float()
        groups: dict[tuple[torch.device, torch.dtype], list[torch.Tensor]] = {}
        for p in state.model.parameters():
            if p.grad is not None:
                groups.setdefault((p.grad.device, p.grad.dtype), []).append(p.grad)
        for grads in groups.values():
            found = torch.zeros(1, device=grads[0].device)
            torch._amp_foreach_non_finite_check_and_unscale_(grads, found, inv_scale.to(grads[0].device))
            self.found_inf = self.found_inf + found.to(self.found_inf.device).reshape(())
        state.control.skip_update_if(self.found_inf > 0)

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
            f"update skipped, scale now {scale * self.backoff_factor:g} (normal under float16 loss scaling)"
        )
        if self.consecutive_skips == COLLAPSE_STEPS:
            from framework.debug.amp_check import diagnose_step

            report = diagnose_step(state)
            log.v2(
                f"WARNING the loss scale keeps collapsing: {COLLAPSE_STEPS} updates in a row were skipped because the "
                f"gradients overflowed (scale now {scale * self.backoff_factor:g}). Mixed precision breaks here:\n"
                f"{report.format()}"
            )


PLUGINS = (GradScaling,)
