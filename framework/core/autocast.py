"""Autocast precision of a run (``torch_amp``, in RETURNN's notation): how every step function runs.

The options themselves are declared with loss scaling in ``framework.training.amp``.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from framework.base.config import Config
from framework.base.errors import ConfigError
from framework.base.findings import Finding, report

DTYPES = {"float16": torch.float16, "fp16": torch.float16, "half": torch.float16, "bfloat16": torch.bfloat16}
DTYPES["bf16"] = torch.bfloat16
_SCALER_DEFAULTS = {"init_scale": 2.0**16, "growth_factor": 2.0, "backoff_factor": 0.5, "growth_interval": 2000}


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
            report(
                Finding(
                    "warning",
                    "torch_amp = 'bfloat16'",
                    "on a CPU without AVX512-BF16 or AMX: bfloat16 matrix multiplications are emulated there, about "
                    "10x slower than float32. Leave torch_amp out on this machine (framework.core.autocast."
                    "native_bfloat16() tells in a config), or keep it to test mixed precision.",
                    evidence={"dtype": "bfloat16", "native_bfloat16": False, "slowdown": "about 10x"},
                    where={"option": "torch_amp", "device": "cpu"},
                    fix="Leave torch_amp out on this machine, or keep it only to test mixed precision.",
                    option="torch_amp = None",
                )
            )


def native_bfloat16(device: str | torch.device | None = None) -> bool:
    """Whether ``device`` multiplies bfloat16 matrices natively, so that ``torch_amp = "bfloat16"`` saves time.

    True on CUDA GPUs with bfloat16 support (Ampere and later) and on CPUs with AVX512-BF16 or
    AMX. Other CPUs emulate bfloat16 matrix multiplications, about 10x slower than float32.
    None: the device that ``device = "auto"`` picks (the accelerator if there is one, else the CPU).
    """
    if device is None:
        device = torch.accelerator.current_accelerator(check_available=True) or "cpu"
    device_type = torch.device(device).type
    if device_type == "cuda":  # a capability of CUDA GPUs, asked of CUDA
        return torch.cuda.is_available() and torch.cuda.is_bf16_supported(including_emulation=False)
    if device_type != "cpu":  # other accelerators do not say; assume emulated
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
