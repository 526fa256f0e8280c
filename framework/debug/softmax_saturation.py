"""Is a softmax inside the model saturated when training starts? (``debug_softmax_saturation``, on by default.)

A softmax whose rows put nearly all their mass on one entry passes almost no gradient to its scores: attention that
picks one key at random at initialisation learns slowly, with loss spikes. Scores that are the product of two learned
projections (attention's ``q . k``) grow with the width, which is why attention divides them by ``sqrt(d_head)``;
without that, or with a temperature below 1 applied as a multiplication, a wide model starts saturated.

Peaked rows are not a bug by themselves: position biases (ALiBi), masks and hard routing make them by construction.
In the probe session's run of the first batch, every ``softmax`` call (not ``log_softmax``: losses) is measured: the
entropy of each row with at least ``MIN_ENTRIES`` unmasked entries, as a share of a uniform row's. Only where the
median row is below ``PEAKED`` is an experiment run on a copy: every parameter multiplied by ``SCALE``. Scores that
come from the weights shrink with them and the rows become nearly uniform (``UNIFORM``): then the saturation comes
from the scale of the learned computation at initialisation, and it is reported. Rows that stay peaked are peaked by
construction and are not reported.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import torch
from torch.overrides import TorchFunctionMode

from framework.base.config import Config
from framework.base.errors import ModelCheckError
from framework.base.findings import Finding
from framework.base.options import register
from framework.check_library.tensors import format_frame, user_frame
from framework.core.run_ctx import RunCtx
from framework.core.state import RunState
from framework.debug.first_step import SharedRunCheck, run_scaled_copy
from framework.debug.sanity import report_findings

CHECK = "softmax-saturation check"
OFF = "debug_softmax_saturation = False"

register(
    "debug_softmax_saturation",
    "bool",
    True,
    "First step: a softmax inside the model whose rows put nearly all their mass on one entry because its scores "
    "grow with the weights (attention scores not divided by sqrt(d_head)); tested by scaling a copy's parameters.",
    __name__,
)

MIN_ENTRIES = 8  # rows with fewer unmasked entries (the first keys of causal attention) are not judged
MASKED = -1e3  # a score at or below this is a mask (-1e4, -1e9, -inf), not an entry
PEAKED = 0.5  # a median row entropy below this share of a uniform row's is saturated ...
UNIFORM = 0.9  # ... by the weights' scale when a copy with the weights scaled down reaches this share
SCALE = 0.25
SOFTMAX = {torch.softmax, torch.nn.functional.softmax, torch.Tensor.softmax}


@dataclass
class _Rows:
    """Per softmax call site: the median of its rows' entropy shares, the share of rows above 0.9 on one entry and
    the median number of entries."""

    seen: dict[str, tuple[float, float, int]] = field(default_factory=dict)


def _measure(probabilities: torch.Tensor, scores: torch.Tensor, dim: int) -> tuple[float, float, int] | None:
    """(median entropy share, share of rows with an entry above 0.9, median entries) of the judged rows."""
    p = probabilities.detach().float().movedim(dim, -1).reshape(-1, probabilities.shape[dim])
    s = scores.detach().float().movedim(dim, -1).reshape(-1, scores.shape[dim])
    entries = (torch.isfinite(s) & (s > MASKED)).sum(-1)
    judged = entries >= MIN_ENTRIES
    if not judged.any():
        return None
    p, entries = p[judged], entries[judged]
    entropy = -(p * p.clamp_min(1e-30).log()).sum(-1) / entries.float().log()
    return (
        float(entropy.median()),
        float((p.amax(-1) > 0.9).float().mean()),
        int(entries.median()),
    )


class _SoftmaxWatch(TorchFunctionMode):
    def __init__(self, rows: _Rows):
        super().__init__()
        self.rows = rows

    def __torch_function__(self, func: Any, types: Any, args: tuple = (), kwargs: dict | None = None) -> Any:
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        if func in SOFTMAX and args and isinstance(args[0], torch.Tensor) and isinstance(out, torch.Tensor):
            dim = kwargs.get("dim", args[1] if len(args) > 1 else None)
            if isinstance(dim, int) and out.is_floating_point() and out.numel():
                measured = _measure(out, args[0], dim)
                where = format_frame(user_frame())
                if measured is not None and where not in self.rows.seen:
                    self.rows.seen[where] = measured
        return out


class SoftmaxSaturation(SharedRunCheck):
    """Measures the softmax rows of the first batch; tests peaked ones on a copy with smaller weights."""

    bug_check = ("debug_softmax_saturation",)

    check = CHECK

    @classmethod
    def from_config(cls, config: Config, state: RunState) -> SoftmaxSaturation | None:
        return cls() if config.bool("debug_softmax_saturation") else None

    @contextlib.contextmanager
    def observe(self, state: RunState, model: torch.nn.Module) -> Iterator[_Rows]:
        rows = _Rows()
        with _SoftmaxWatch(rows):
            yield rows

    def conclude(self, state: RunState, seen: _Rows, run_ctx: RunCtx | None) -> None:
        peaked = {where: m for where, m in seen.seen.items() if m[0] < PEAKED}
        if not peaked:
            return
        scaled = _Rows()
        if not run_scaled_copy(state, CHECK, SCALE, _SoftmaxWatch(scaled)):
            return
        findings = []
        for where, (entropy, saturated, entries) in peaked.items():
            after = scaled.seen.get(where)
            if after is None or after[0] < UNIFORM:
                continue  # peaked by construction (position biases, masks, routing), not by the weights' scale
            findings.append(
                Finding(
                    "warning",
                    "sanity check",
                    f"The softmax at {where} is saturated when training starts: over the first batch, the median row's "
                    f"entropy is {entropy:.0%} of a uniform row's over its {entries} entries, and {saturated:.0%} of "
                    f"the rows put more than 0.9 on one entry. On a copy with every parameter multiplied by {SCALE:g} "
                    f"the rows are nearly uniform ({after[0]:.0%}): the scores grow with the weights, and at the "
                    f"model's own scale the softmax passes little gradient to them (slow learning, loss spikes). "
                    f"Typical cause: attention scores (a product of two projections) not divided by sqrt(d_head), or "
                    f"a temperature below 1 applied as a multiplication.",
                    evidence={
                        "entropy_share": entropy,
                        "rows_above_0.9": saturated,
                        "entries": entries,
                        "entropy_share_scaled": after[0],
                        "scale": SCALE,
                    },
                    where={"line": where},
                    fix="Scale the scores down: divide attention scores by sqrt(d_head) (or the temperature).",
                    option=OFF,
                )
            )
        report_findings(state, "first step", findings, ModelCheckError, False, off=OFF)


PLUGINS = (SoftmaxSaturation,)
