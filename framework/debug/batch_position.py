"""Does a sequence's output depend on where it sits in its batch? (``debug_batch_position_check``, on by default.)

Before the first step, the step runs on a copy of the model in eval mode with one batch made of the first sequence
repeated at every place (every key whose first axis is the batch's, lengths included). Every row then holds the same
input and the same batch-mates, so rows can differ only by their index in the batch: positions taken along the
batch axis of a batch-major tensor, a table indexed by the row. A statistic over the batch or a view that mixes rows
gives identical rows the same result, so this experiment tells an index-dependence from batch-mates that influence
each other (the batch-independence check's question). It runs under two seeds: rows that differ the same way under
both come from the index, rows that differ otherwise from randomness in the step (noise drawn per row), which is
not judged. Where the index enters is the first module, in the order they run, whose input or output rows differ.
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
from framework.check_library.probe import PROBE_SESSION, ProbeLimit, ProbeSession
from framework.check_library.tensors import named_tensors
from framework.core.events import Event, Order
from framework.core.plugin import Plugin, on
from framework.core.state import RunState
from framework.debug.batch_independence import batch_axis
from framework.debug.sanity import report_findings

CHECK = "batch-position check"
register(
    "debug_batch_position_check",
    "bool",
    True,
    "Before the first step: run one batch of the first sequence repeated; warn if the rows' outputs differ.",
    __name__,
)

# Rows that differ by more than this fraction of the largest magnitude differ (identical inputs in one batch may
# take other kernels' rounding only at this scale).
TOLERANCE = 1e-4
SEEDS = (0, 1)


def repeated_first(batch: dict[str, Any], size: int) -> dict[str, Any]:
    """``batch`` with every tensor whose first axis is the batch's holding its first entry at every place."""
    return {
        key: value[:1].expand(size, *value.shape[1:]).clone()
        if isinstance(value, torch.Tensor) and value.dim() and value.shape[0] == size
        else value
        for key, value in batch.items()
    }


def _rows(t: torch.Tensor, size: int, leading: bool = False) -> torch.Tensor | None:
    """The [size, -1] rows of a floating tensor with one batch axis of ``size``; None for a tensor without one (or
    with more than one axis of that size, unless ``leading``: then the first axis when it has that size, as the batch
    was built)."""
    axis = batch_axis(t, size)
    if axis is None and leading and t.dim() and t.shape[0] == size:
        axis = 0
    if axis is None or not t.is_floating_point() or not t.numel():
        return None
    return t.detach().double().movedim(axis, 0).reshape(size, -1)


def row_spread(t: torch.Tensor, size: int, leading: bool = False) -> tuple[float, float] | None:
    """(largest difference of a row from the first row, largest magnitude) of ``_rows``; None where it finds none."""
    rows = _rows(t, size, leading)
    return None if rows is None else (float((rows - rows[:1]).abs().max()), float(rows.abs().max()))


def row_distances(t: torch.Tensor, size: int) -> list[float] | None:
    """Each row's largest difference from the first row (the pattern of which places differ), of ``_rows``; None
    where it finds none."""
    rows = _rows(t, size)
    return None if rows is None else (rows - rows[:1]).abs().amax(1).tolist()


def _differs(spread: tuple[float, float] | None) -> bool:
    return spread is not None and spread[0] > TOLERANCE * max(spread[1], 1e-12)


class BatchPosition(Plugin):
    """Runs the batch-position experiment on the first batch, before the first step."""

    bug_check = ("debug_batch_position_check",)
    order = Order.CHECK
    needs = (PROBE_SESSION,)

    @classmethod
    def from_config(cls, config: Config, state: RunState) -> BatchPosition | None:
        return cls() if config.bool("debug_batch_position_check") else None

    @on(Event.STEP_START, once=True)
    def probe(self, state: RunState) -> None:
        session = state.store.get(PROBE_SESSION)
        sizes = {v.shape[0] for v in state.batch.values() if isinstance(v, torch.Tensor) and v.dim()}
        if session is None or len(sizes) != 1 or min(sizes) < 2:
            return  # keys with different first axes (no one batch axis), or one sequence: nothing to compare
        size = sizes.pop()
        batch = repeated_first(state.batch, size)
        try:
            runs = [self._run(session, batch, size, seed) for seed in SEEDS]
        except ProbeLimit as exc:
            log.v5(f"Batch-position check skipped: the step on a batch of one repeated sequence failed ({exc}).")
            return
        outputs, trace = runs[0]
        moved = [(name, spread) for name, spread, _ in outputs if _differs(spread)]
        if not moved or not _same_runs(runs):
            return
        name, (change, scale) = max(moved, key=lambda item: item[1][0] / max(item[1][1], 1e-12))
        where = _entry(trace)
        report_findings(
            state,
            "first step",
            [_finding(size, name, change, scale, where)],
            ModelCheckError,
            False,
            off="debug_batch_position_check = False",
        )

    @staticmethod
    def _run(
        session: ProbeSession, batch: dict[str, Any], size: int, seed: int
    ) -> tuple[list[tuple[str, tuple[float, float] | None, Any]], list[tuple[str, tuple[float, float] | None]]]:
        """(the model's outputs, each with its ``row_spread`` and ``row_distances``; every module's inputs and outputs
        in the order they happened, with their ``row_spread``), each named, of one eval-mode run on a fresh copy under
        ``seed``."""
        outputs: list[tuple[str, tuple[float, float] | None, Any]] = []
        trace: list[tuple[str, tuple[float, float] | None]] = []

        def keep(_module: Any, _args: Any, output: Any) -> None:
            outputs.extend(
                (n, row_spread(t, size), row_distances(t, size))
                for n, t in named_tensors(output)
                if t.is_floating_point()
            )

        def follow(name: str, kind: str) -> Any:
            def hook(module: nn.Module, args: Any, output: Any = None) -> None:
                seen = args if kind == "input" else output
                # Only to place the difference: an ambiguous axis is taken as the leading one, as the batch was built.
                spreads = [row_spread(t, size, leading=True) for _, t in named_tensors(seen) if t.is_floating_point()]
                known = [s for s in spreads if s is not None]
                if known:
                    worst = max(known, key=lambda s: s[0] / max(s[1], 1e-12))
                    trace.append((f"the {kind} of {name!r} ({type(module).__name__})", worst))

            return hook

        with session.isolated(CHECK) as model, torch.no_grad():
            handles = [model.register_forward_hook(keep)]
            for name, module in model.named_modules():
                if name:
                    handles.append(module.register_forward_pre_hook(follow(name, "input")))
                    handles.append(module.register_forward_hook(follow(name, "output")))
            try:
                seed_everything(seed)  # the isolated block restores every generator afterwards
                session.changed_run(CHECK, model, batch, optional=True)
            finally:
                for handle in handles:
                    handle.remove()
        return outputs, trace


def _same_runs(runs: list[tuple[list, list]]) -> bool:
    """Whether the runs under the seeds saw the same rows differ by the same amounts (else randomness in the step
    made them: a flip drawn per row differs as much under any seed, at other places)."""
    first = [d for _, _, d in runs[0][0]]
    return all([d for _, _, d in outputs] == first for outputs, _ in runs[1:])


def _entry(trace: list[tuple[str, tuple[float, float] | None]]) -> str:
    """Where the rows first differ: "between X and Y" (X the last point whose rows were the same), or ""."""
    same = ""
    for name, spread in trace:
        if _differs(spread):
            return f"between {same} and {name}" if same else f"at {name}"
        same = name
    return ""


def _finding(size: int, output: str, change: float, scale: float, where: str) -> Finding:
    what = f"output {output!r}" if output else "output"
    enters = f" The rows first differ {where}." if where else ""
    return Finding(
        "warning",
        "sanity check",
        f"a sequence's result depends on where it sits in its batch: the first sequence, put at all {size} places "
        f"of one batch (so every row has the same input and the same batch-mates), gets a different {what} at "
        f"different places (rows up to {change:.3g} apart, values up to {scale:.3g}), the same way under two "
        f"seeds.{enters} Something is indexed or sized by the batch axis: positions taken from the batch axis of a "
        f"batch-major tensor (x.size(0) where the time axis was meant), a table added along the batch axis.",
        evidence={"batch_size": size, "output": output, "row_difference": change, "magnitude": scale},
        where={"output": output, "enters": where},
        fix="Take positions from the time axis (x.size(1) for batch-major tensors) and broadcast them over the "
        "batch ([None, :, :]); nothing in a model should depend on a sequence's index in its batch.",
    )


PLUGINS = (BatchPosition,)
