"""Parameters that the losses training them do not depend on: a gradient that is exactly zero by construction.

A Wasserstein critic's loss is the mean of its scores of generated samples minus the mean of its scores of real
ones; the bias of its last layer adds the same amount to both and cancels, so its gradient is exactly zero at every
step and it never moves. A hinge loss inside its margin does the same. That is how these critics are written, not
a dead unit. Two measurements tell the two apart, on a copy of the model (eval mode, the run untouched) running
``train_step`` on one batch: the parameter's layer gives what the step gets from the model (the model, a part the
step calls, or the last layer of one), so nothing inside the model can swallow a change of it; and moving the
parameter by ``SHIFT`` leaves every loss that trains it unchanged. A dead unit's bias fails the first: a ReLU
after it swallows the change.
"""

from __future__ import annotations

import math
from typing import Any

import torch

from framework.base import log
from framework.base.findings import Finding
from framework.check_library.model_checks import (
    ROOT,
    by_module,
    capture_outputs,
    named,
    parameter_optimizers,
    top_level_calls,
)
from framework.check_library.probe import ProbeLimit, ProbeSession, replace_parameters

CHECK = "loss invariance"
CALLED = " called by the step"  # the entry of the captured outputs that lists the modules the step calls
SHIFT = 1e-2  # small: a hinge loss stays inside its margin
SAME = 1e-5  # a change of a loss below this (relative, at least of 1) is float32 rounding of a cancelled sum


def invariant_parameters(state: Any, names: list[str]) -> list[str]:
    """Of the parameters ``names``, those that no loss training them depends on (measured on a copy, with this
    step's batch or else the first train batch of the epoch); [] when the copy cannot run."""
    loader = state.loaders.get("train")
    batch = state.batch if state.batch is not None or loader is None else loader.first_batch(max(state.epoch, 1))
    if not names or batch is None:
        return []
    owner = parameter_optimizers(state.optimizer, state.model)
    groups: dict[str | None, list[str]] = {}
    for name in names:
        groups.setdefault(owner.get(name), []).append(name)
    session = ProbeSession(state)
    try:
        before, outputs = _losses(session, batch, set())
        invariant = []
        for optimizer, group in groups.items():
            if not all(_terminal(name.rpartition(".")[0] or ROOT, outputs) for name in group):
                continue  # a layer inside the model: a dead unit after it would leave the losses unchanged too
            after, _ = _losses(session, batch, set(group))
            relevant = [n for n, marked_for in before.items() if optimizer is None or optimizer in marked_for[1]]
            if relevant and all(_same(before[n][0], after[n][0]) for n in relevant):
                invariant += group
        return invariant
    except ProbeLimit as exc:
        log.v5(f"Loss invariance: the copy could not run ({exc}).")
        return []


def _losses(
    session: ProbeSession, batch: dict[str, torch.Tensor], shifted: set[str]
) -> tuple[dict[str, tuple[float, Any]], dict[str, list[torch.Tensor]]]:
    """``train_step`` on a copy whose parameters ``shifted`` are moved by ``SHIFT``: per optimized loss its value and
    the optimizers it is marked for, and the outputs of every module."""
    with session.isolated(CHECK) as model:  # with autograd: a step may take gradients itself (a gradient penalty)
        targets = {id(p) for n, p in model.named_parameters() if n in shifted}
        replace_parameters(model, lambda p: p + SHIFT if id(p) in targets else None)
        with capture_outputs(model, ["*"]) as outputs, top_level_calls(model) as calls:
            run_ctx = session.changed_run(CHECK, model, batch, optional=True)
        outputs[CALLED] = {path for path, _ in calls}  # type: ignore[assignment]
    losses = {
        name: (float(marked.normalized().detach().float()), marked.optimizer or ())
        for name, marked in run_ctx.losses.items()
        if not marked.as_error
    }
    return losses, outputs


def _terminal(path: str, outputs: dict[str, Any]) -> bool:
    """Whether module ``path`` gives what the step itself gets from the model: the step calls it, or its outputs
    are those of a module the step calls (the last layer of a ``Sequential``)."""
    called = outputs[CALLED]
    if path in called:
        return True
    own = {_place(t) for t in outputs.get(path, [])}
    return bool(own) and any(own <= {_place(t) for t in outputs.get(p, [])} for p in called)


def _place(tensor: torch.Tensor) -> tuple[int, tuple[int, ...]]:
    return tensor.untyped_storage().data_ptr(), tuple(tensor.shape)


def _same(a: float, b: float) -> bool:
    return math.isfinite(a) and math.isfinite(b) and abs(a - b) <= SAME * max(abs(a), abs(b), 1.0)


def invariance_note(model: torch.nn.Module, names: list[str], updates: int) -> Finding:
    """The note that ``names`` never get a gradient because no loss training them depends on them."""
    return Finding(
        "note",
        "sanity check",
        f"{by_module(model, names)} get a gradient that is exactly zero in all {updates} updates, and shifting them "
        f"by {SHIFT:g} on a copy changes what their layer outputs (the output of the model part) but no loss that "
        f"trains them: the losses do not depend on them (a "
        f"Wasserstein or hinge critic's output bias cancels between real and generated samples), so they stay as "
        f"initialised. Harmless; drop them (bias=False) to say so.",
        evidence={"parameters": len(names), "shift": SHIFT, "updates": updates},
        where=named(names),
    )
