"""Where mixed precision breaks: each module of a step, run under autocast and again in float32.

The step is replayed once in eval mode under the run's autocast; every leaf module records its
inputs and output. Each leaf is then run again on the same inputs, upcast to float32, with
autocast off. The first module whose float32 output exceeds the autocast dtype's largest value
(or whose autocast output is non-finite from finite inputs) is where the values overflow; else
the module whose own output differs most from its float32 run is where precision is lost. Each
module is judged on its own inputs, so the error it adds is not confused with the error it was
handed. Used when a run under autocast hits NaN/Inf, when the loss scale keeps collapsing, and
at the first step with ``debug_amp_check`` (framework.debug.amp_check).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import torch

from framework.base.rng import get_rng_state, set_rng_state
from framework.check_library.probe import model_copy, parameters_kept
from framework.check_library.tensors import floating_tensors, map_tensors
from framework.core.run_ctx import RunCtx
from framework.core.state import RunState
from framework.core.step import call_step, step_function


@dataclass
class ModuleError:
    """One leaf module call: its autocast output against its float32 output on the same inputs."""

    path: str
    kind: str
    dtype: torch.dtype  # of the autocast output
    max_abs_fp32: float
    relative_error: float
    nonfinite: bool  # the autocast output is NaN/Inf although the inputs are finite

    def describe(self, autocast_dtype: torch.dtype) -> str:
        return (
            f"{self.path} ({self.kind}): output max |x| {self.max_abs_fp32:.4g} in float32, "
            f"relative difference {self.relative_error:.3g} (output dtype {str(self.dtype).replace('torch.', '')})"
        )


@dataclass
class AmpReport:
    """The modules of one replayed step, in call order."""

    dtype: torch.dtype
    modules: list[ModuleError] = field(default_factory=list)

    @property
    def overflow(self) -> ModuleError | None:
        """The first module whose values leave the autocast dtype's range."""
        limit = torch.finfo(self.dtype).max
        for m in self.modules:
            if m.nonfinite or m.max_abs_fp32 > limit:
                return m
        return None

    def worst(self, n: int = 3) -> list[ModuleError]:
        """The modules that differ most from float32."""
        finite = [m for m in self.modules if math.isfinite(m.relative_error)]
        return sorted(finite, key=lambda m: -m.relative_error)[:n]

    def format(self) -> str:
        name, limit = str(self.dtype).replace("torch.", ""), torch.finfo(self.dtype).max
        if not self.modules:
            return f"  mixed precision ({name}): no leaf module ran in the replay"
        lines = []
        overflow = self.overflow
        if overflow is not None:
            seen = (
                "NaN/Inf" if overflow.nonfinite and overflow.max_abs_fp32 <= limit else f"{overflow.max_abs_fp32:.4g}"
            )
            lines.append(
                f"  first module whose output overflows {name} (max {limit:.6g}): {overflow.path} "
                f"({overflow.kind}), value seen {seen}"
            )
        else:
            lines.append(f"  no module output leaves {name}'s range (max {limit:.6g})")
        lines.append("  modules that differ most from the same module run in float32 on the same inputs:")
        lines += [f"    {m.describe(self.dtype)}" for m in self.worst()]
        return "\n".join(lines)


def diagnose_step(state: RunState, rng_state: dict[str, Any] | None = None) -> AmpReport:
    """Replay ``state``'s step (eval mode, no gradients) and compare every leaf module with float32."""
    precision = state.precision
    try:
        model = model_copy(state.model)  # the user's modules never see the replay
    except Exception:  # a model that cannot be copied (a lock, a file) is replayed itself, as before
        model = state.model
    leaves = {m: p for p, m in model.named_modules() if not list(m.children())}
    calls: list[tuple[str, torch.nn.Module, tuple, dict, Any]] = []

    def record(module: torch.nn.Module, args: tuple, kwargs: dict, output: Any) -> None:
        # Copies: a later in-place op (ReLU(inplace=True)) would change what this module returned.
        calls.append((leaves[module], module, *map_tensors((args, kwargs, output), torch.clone)))

    handles = [m.register_forward_hook(record, with_kwargs=True) for m in leaves]
    rng = get_rng_state()
    model.eval()
    run_ctx = RunCtx(
        stage="eval", epoch=state.epoch, step=state.global_step, batch=state.batch, autocast=precision.autocast
    )
    try:
        if rng_state is not None:
            set_rng_state(rng_state)
        with torch.no_grad(), parameters_kept(state.model, "The float32 comparison"):  # the copy shares the parameters
            call_step(step_function(state.config, "eval"), model, run_ctx)
        for h in handles:
            h.remove()
        handles = []
        report = AmpReport(precision.dtype)
        with torch.no_grad(), torch.autocast(precision.device_type, enabled=False):
            for path, module, args, kwargs, output in calls:
                error = _compare(path, module, args, kwargs, output)
                if error is not None:
                    report.modules.append(error)
    finally:
        for h in handles:
            h.remove()
        set_rng_state(rng)
    return report


def _upcast(value: Any) -> Any:
    return map_tensors(value, lambda t: t.float() if t.is_floating_point() else t)


def _compare(path: str, module: torch.nn.Module, args: tuple, kwargs: dict, output: Any) -> ModuleError | None:
    low = floating_tensors(output)
    if not low:
        return None
    if any(p.dtype != torch.float32 for p in module.parameters(recurse=False)):
        return None  # a module kept in low precision on purpose has no float32 twin here
    inputs_finite = all(bool(torch.isfinite(t).all()) for t in floating_tensors(args))  # before an in-place rerun
    try:
        high = floating_tensors(module(*_upcast(args), **_upcast(kwargs)))
    except Exception:  # a module that cannot run on float32 inputs: nothing to compare
        return None
    if not high or high[0].shape != low[0].shape:
        return None
    a, b = low[0].float(), high[0]
    max_abs = float(b.abs().max()) if b.numel() else 0.0
    finite = torch.isfinite(a) & torch.isfinite(b)
    diff, scale = 0.0, 0.0
    if bool(finite.any()):
        diff, scale = float((a[finite] - b[finite]).abs().max()), float(b[finite].abs().max())
    return ModuleError(
        path,
        type(module).__name__,
        low[0].dtype,
        max_abs,
        diff / max(scale, 1e-30),
        inputs_finite and not bool(torch.isfinite(a).all()),
    )
