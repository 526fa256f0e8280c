"""A sequence in one batch against the same sequence in another (``debug_batch_mates``, on by default).

What the model computes for one sequence must not depend on which other sequences share its batch. The gradient
probe (``debug_batch_independence``) sees mixing that flows through the model's float inputs; it cannot see a
pairing made by indexing before the first layer (an utterance sorted by its length and its reply by its own, so that
each utterance meets another example's reply), because indexing integer ids carries no gradient.

The experiment, before the first step, on copies of the model in eval mode (no dropout; batch norm uses its running
statistics): the first sequences of the batch (14, or another size that no other axis has) run through
``train_step`` together, then as two batches of the same size, each one half repeated, with the same padded length:
each sequence keeps its input and its place in the batch (positions along the batch axis are the batch-position
check's), and only its batch-mates change. Every row of what the model returns to the step (the first floating
output of each call the step makes to the model or a part of it, along its batch axis) must equal a row of the
halves' runs, in any order (a step may sort the batch). A row that equals none is a warning: the model's result
for a sequence depends on its batch-mates. A model whose outputs change with the random state (sampling in its
forward) is left undecided, and so is a step whose calls or output shapes depend on the batch.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from framework.base import log
from framework.base.config import Config
from framework.base.errors import ModelCheckError
from framework.base.findings import Finding
from framework.base.options import register
from framework.base.rng import seed_everything
from framework.check_library.model_checks import top_level_calls
from framework.check_library.probe import PROBE_SESSION, ProbeLimit, ProbeSession
from framework.check_library.tensors import floating_tensors
from framework.core.events import Event, Order
from framework.core.plugin import Plugin, on
from framework.core.state import RunState
from framework.debug.sanity import report_findings

CHECK = "batch-mates check"
register(
    "debug_batch_mates",
    "bool",
    True,
    "Before the first step: run some sequences of the first batch together and as two batches of one half repeated "
    "(eval mode, on copies) and warn when what the model returns for a sequence depends on its batch-mates.",
    __name__,
)

SIZES = (14, 10, 22, 6, 26)  # sequences run together (even: two halves): the first that no other axis has
RTOL, ATOL = 1e-4, 1e-5  # rows closer than this (relative to the row's scale) are equal: batched kernels round
PROBLEM = "sequences of a batch influence each other"


class BatchMates(Plugin):
    """Runs the batch-against-halves experiment once, before the first step."""

    bug_check = ("debug_batch_mates",)
    order = Order.CHECK
    needs = (PROBE_SESSION,)

    @classmethod
    def from_config(cls, config: Config, state: RunState) -> BatchMates | None:
        return cls() if config.bool("debug_batch_mates") else None

    @on(Event.STEP_START, once=True)
    def probe(self, state: RunState) -> None:
        session = state.store.get(PROBE_SESSION)
        sizes = {t.shape[0] for t in state.batch.values() if isinstance(t, torch.Tensor) and t.dim()}
        if session is None or len(sizes) != 1:
            return
        size = _size(state.batch, state.model, sizes.pop())
        if size is None:
            return
        together = {k: t[:size] for k, t in state.batch.items()}
        half = size // 2
        try:
            whole = _outputs(session, together)
            # Each half repeated to the full size: every sequence keeps its place (a step that reads positions along
            # the batch axis is the batch-position check's), only its batch-mates change.
            parts = [
                _outputs(session, {k: torch.cat([t[lo:hi], t[lo:hi]]) for k, t in together.items()})
                for lo, hi in ((0, half), (half, size))
            ]
            found = _unmatched(whole, parts, size)
            if found is None:
                return
            if _outputs(session, together, seed=1) != whole:  # sampling in the forward: no decision
                log.v5("Batch-mates check: the model's outputs change with the random state; not decided.")
                return
        except ProbeLimit as exc:
            log.v5(f"Batch-mates check skipped: a run failed ({exc}).")
            return
        call, row, distance = found
        finding = Finding(
            "warning",
            "sanity check",
            f"What the model returns for a sequence depends on which other sequences share its batch: on copies in "
            f"eval mode, the first {size} sequences of the first batch ran through train_step together and then in "
            f"two batches of one half repeated (same padded length and place, so each one's input was the same), and row {row} of the output of "
            f"{call.name} equals none of the outputs of the halves (the closest differs by "
            f"{distance:.2g} of its largest value). Something pairs or mixes the sequences of a batch: typically one key reordered (sorted "
            f"by its own lengths, shuffled) and not put back into the order of the others, or a statistic over the "
            f"batch axis. The gradient probe of the model's float inputs does not see it, so it happens where no "
            f"gradient flows (indexing, sorting, or the integer ids before the first layer).",
            evidence={"problem": PROBLEM, "sequences": size, "row": row, "difference_to_closest": distance},
            where={"module": call.name, "at": "output"},
            fix="Keep every key of a sequence in the same order (apply one permutation to all of them and undo it), "
            "and compute statistics per sequence, not over the batch axis.",
        )
        report_findings(state, "first step", [finding], ModelCheckError, False, off="debug_batch_mates = False")


class _Call:
    """One call the step made to the model or a part of it: its first floating output with a batch axis."""

    def __init__(self, name: str, output: torch.Tensor):
        self.name = name
        self.output = output.detach()

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, _Call)
            and self.output.shape == other.output.shape
            and torch.equal(self.output, other.output)
        )


def _size(batch: dict[str, Any], model: nn.Module, batch_size: int) -> int | None:
    """How many sequences to run together (an even number): a size that no other axis of the batch or of a parameter
    has (so the batch axis of every output is known)."""
    taken = {n for t in batch.values() if isinstance(t, torch.Tensor) for n in t.shape[1:]}
    taken |= {n for p in model.parameters() for n in p.shape}
    return next((n for n in SIZES if n <= batch_size and n not in taken), None)


def _outputs(session: ProbeSession, batch: dict[str, Any], seed: int | None = None) -> list[_Call]:
    with session.isolated(CHECK) as model, torch.no_grad():
        if seed is not None:
            seed_everything(seed)  # the isolated block restores every generator afterwards
        with top_level_calls(model) as calls:
            session.changed_run(CHECK, model, batch, optional=True)
    firsts = ((path, next(iter(floating_tensors(output)), None)) for path, output in calls)
    return [_Call(repr(path), first) for path, first in firsts if first is not None and first.dim() > 0]


def _unmatched(together: list[_Call], parts: list[list[_Call]], size: int) -> tuple[_Call, int, float] | None:
    """The first row of a call in ``together`` that equals no row of the same call in the runs of the ``parts`` of
    its batch, with the largest difference to the closest (relative to its largest value); None when every row has
    its equal, or when the calls cannot be paired (other calls or shapes: a step whose work depends on the batch)."""
    if not together or any(len(calls) != len(together) for calls in parts):
        return None
    for index, call in enumerate(together):
        axes = [i for i, n in enumerate(call.output.shape) if n == size]
        if len(axes) != 1:
            continue  # no batch axis (a loss, a statistic), or an ambiguous one
        axis = axes[0]
        outputs = [calls[index].output for calls in parts]
        shape = call.output.shape
        if any(o.shape != shape for o in outputs):
            return None
        candidates = [row for o in outputs for row in o.unbind(axis)]
        for row_index, row in enumerate(call.output.unbind(axis)):
            if not any(_equal(row, candidate) for candidate in candidates):
                return call, row_index, min(_difference(row, candidate) for candidate in candidates)
    return None


def _equal(a: torch.Tensor, b: torch.Tensor) -> bool:
    a, b = a.double(), b.double()
    if not (torch.isfinite(a).all() and torch.isfinite(b).all()):
        return True  # not finite: nothing to tell (the numerics checks name it)
    scale = float(b.abs().max()) if b.numel() else 0.0
    return bool(((a - b).abs() <= ATOL * scale + RTOL * b.abs()).all())


def _difference(a: torch.Tensor, b: torch.Tensor) -> float:
    scale = max(float(b.double().abs().max()), 1e-12)
    return float((a.double() - b.double()).abs().max()) / scale


PLUGINS = (BatchMates,)
