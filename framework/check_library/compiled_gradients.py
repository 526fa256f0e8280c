"""Whose fault are missing or vanishing gradients in a compiled run: the model's, or ``torch.compile``'s?

When gradient health sees parameters whose gradient is zero, tiny or missing and the step model is
``torch.compile``d (``torch_compile``), the same symptom has two families of causes: the model's own
(a detached branch, a zeroed path: eager mode computes the same gradients) and the compiler's (a
backend or recompile bug: the compiled graph's gradients differ from eager mode's). One eager step of
the same batch on an isolated copy of the model (the probe session: parameters shared, everything
else copied, random generators and the real gradients restored afterwards) tells them apart. It runs
only when such a symptom fires in a compiled run.

The compiled step's gradients are the real step's, taken right before its optimizer step; the eager
step runs after that update, so the two differ by one update (small next to a gradient that is there
in one and not in the other, which is what is judged). Each parameter's gradient is compared as its
share of the step's whole gradient norm, so loss scaling, accumulation shares and dropout masks do
not count as a difference.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Iterable
from dataclasses import dataclass

import torch

from framework.check_library.probe import ProbeLimit, ProbeSession
from framework.core.state import RunState

# A parameter's gradient share that differs from eager mode's by more than this fraction (relative) differs.
DIFFERENT = 0.5
# Eager mode's gradient RMS below this fraction of its largest: eager mode finds the gradient (near) zero too.
NEGLIGIBLE = 1e-4
# Parameters named in the sentence (the evidence lists all).
NAMED = 6


def is_compiled(model: torch.nn.Module | None) -> bool:
    """Whether ``model`` is a ``torch.compile``d module (without importing torch's compiler when no run did)."""
    dynamo = sys.modules.get("torch._dynamo")
    return dynamo is not None and isinstance(model, dynamo.eval_frame.OptimizedModule)


@dataclass
class EagerComparison:
    """The compiled step's gradients against an eager step's on the same batch, for the parameters judged."""

    differ: dict[str, float]  # parameter -> relative difference of its gradient share, where it differs
    max_rel_diff: float  # over the parameters judged
    not_decided: str | None = None  # why no comparison could be made

    def sentence(self) -> str:
        """What the comparison says, to add to the symptom's message."""
        if self.not_decided is not None:
            return (
                f"The model is compiled (torch_compile); whether torch.compile or the model is at fault is not decided "
                f"yet: an eager step of the batch could not run ({self.not_decided}). A run with torch_compile = False "
                f"decides it."
            )
        if self.differ:
            names = ", ".join(list(self.differ)[:NAMED]) + (
                f" and {len(self.differ) - NAMED} more" if len(self.differ) > NAMED else ""
            )
            return (
                f"The compiled model's gradients differ from eager mode's (an eager step of the same batch on a copy "
                f"of the model: max rel diff {self.max_rel_diff:.3g}, parameters {names}): a compiler problem, not the "
                f"model's. Run with torch_compile = False to confirm, and report it to PyTorch."
            )
        return (
            f"An eager step of the same batch on a copy of the model agrees (max rel diff {self.max_rel_diff:.3g}): "
            f"not torch.compile's doing, the model's own."
        )


def compare_with_eager(state: RunState, compiled: dict[str, float | None], names: list[str]) -> EagerComparison:
    """Compare ``compiled`` (each parameter's gradient norm in the compiled step of ``state.batch``; None: it got
    no gradient) with an eager step of ``state.batch`` on an isolated copy of ``state.model``, for ``names``."""
    check = "gradient health (eager step of a compiled run)"
    session = ProbeSession(state)
    try:
        with session.isolated(check, train=True) as model, torch.enable_grad():
            params = dict(model.named_parameters())  # shared with state.model: the session restores its gradients
            for p in params.values():
                p.grad = None
            session.changed_run(check, model, state.batch).total_loss().backward()
            eager = {n: None if p.grad is None else float(p.grad.detach().double().norm()) for n, p in params.items()}
            sizes = {n: max(p.numel(), 1) for n, p in params.items()}
    except ProbeLimit as exc:
        return EagerComparison({}, math.nan, not_decided=str(exc.cause))
    eager_total, compiled_total = _total(eager.values()), _total(compiled.values())
    largest_rms = max((g / math.sqrt(sizes[n]) for n, g in eager.items() if g), default=0.0)
    diffs, differ = [], {}
    for name in names:
        e, c = eager.get(name), compiled.get(name)
        if not e or e / math.sqrt(sizes[name]) < NEGLIGIBLE * largest_rms:
            diffs.append(0.0)  # eager mode finds no gradient either: the model's own
            continue
        e_share, c_share = e / eager_total, (c or 0.0) / compiled_total if compiled_total else 0.0
        diff = abs(c_share - e_share) / e_share
        diffs.append(diff)
        if diff > DIFFERENT:
            differ[name] = diff
    return EagerComparison(differ, max(diffs, default=0.0))


def _total(norms: Iterable[float | None]) -> float:
    return math.sqrt(sum(g * g for g in norms if g))
