"""Does the step's own code for evaluation make the evaluation path score the training data worse? The experiment.

A symptom asks for it: at the end of epoch 1 the first train batches score far worse evaluated as dev is than in
training mode (``learning_watch``). The evaluation path differs from the training path in two ways that can be told
apart: the modules run in eval mode, and ``train_step`` sees ``run_ctx.train_flag`` False. On a copy, the first train
batch runs a third way: modules in eval mode, ``train_flag`` True. When that closes most of the gap, what parts the
paths is the step's own branch for evaluation, and the inputs the model receives on both ways say what it does:
the same values moved along an axis (a sequence padded on the left instead of the right, shifted by its padding) is
a rearrangement the model was not trained on; other values (decoding without the targets) can be a choice.
"""

from __future__ import annotations

import contextlib
import inspect
import sys
import traceback
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from typing import Any

import torch

from framework.check_library.tensors import format_frame, is_user_file
from framework.core.run_ctx import RunCtx
from framework.core.state import RunState
from framework.core.step import run_step
from framework.debug.symptom_runs import buffers_restored, first_train_batch, once_per_step

CLOSES = 0.5  # the branch explains the gap when it closes at least this share of it
SHIFT_CANDIDATES = 16  # shifts tried per row: where the row's first frame reappears


@dataclass
class Moved:
    """A model input that the evaluation branch gives with the training branch's values moved along ``axis``."""

    argument: str  # the forward argument's name
    axis: int
    row_shifts: list[int]  # per sequence: positions moved (toward the end positive; 0: not moved)
    padding_first: bool  # every row moved toward the end, the places before it filled with one value (padding)

    def text(self, together: list[str] | None = None) -> str:
        """How the argument's values were moved (``together``: the arguments moved alike, this one first)."""
        names = [repr(n) for n in (together or [self.argument])]
        shown = names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]
        moved = [s for s in self.row_shifts if s]
        low, high = min(moved), max(moved)
        moves = f"{low:+d}" if low == high else f"{low:+d} to {high:+d}"
        said = (
            f"the model's argument{'s' if len(names) > 1 else ''} {shown} {'holds' if len(names) == 1 else 'hold'}, for {len(moved)} of "
            f"{len(self.row_shifts)} sequences, the values the training branch gives, moved by {moves} positions "
            f"along axis {self.axis}"
        )
        if self.padding_first:
            said += (
                ", the places before each sequence filled with one value: the sequences are padded on the left, so "
                "each sits at positions shifted by its padding from where training showed it"
            )
        return said


@dataclass
class StepBranch:
    """The step's evaluation branch against its training branch on the first train batch, modules in eval mode."""

    evaluated: float  # the evaluation path as it is (eval mode, train_flag False)
    flagged: float  # eval mode, train_flag True
    trained: float  # the training path (training mode, train_flag True)
    read_at: str | None  # the user's source line that read the flag
    moved: list[Moved] = field(default_factory=list)
    other: list[str] = field(default_factory=list)  # model arguments with other values or shapes, or on one branch
    rearranged: float | None = None  # the training branch with the arguments moved (and outputs moved back)

    @property
    def closed(self) -> float:
        """The share of the gap between the paths that train_flag True closes."""
        return (self.evaluated - self.flagged) / max(self.evaluated - self.trained, 1e-12)

    @property
    def problem(self) -> str:
        """The problem key (``evidence["problem"]``) shared by the checks that run this experiment."""
        return "train_step's branch for evaluation rearranges the model's inputs"

    @property
    def fix(self) -> str:
        """What to do about a rearrangement."""
        padding = any(m.padding_first for m in self.moved)
        return "Arrange the model's inputs on the evaluation path as training does" + (
            " (the padding after each sequence, or positions counted from each sequence's first real frame)."
            if padding
            else "."
        )

    @property
    def rearranges(self) -> bool:
        """Whether the branch gives the model the training branch's own values rearranged, and nothing else new."""
        return bool(self.moved) and not self.other

    @property
    def moves_explain(self) -> bool:
        """Whether the moves alone, made on the training branch (outputs moved back), open most of the gap: the
        model computes otherwise on its inputs so arranged, which no intended evaluation needs."""
        gap = self.evaluated - self.flagged
        return self.rearranged is not None and gap > 0 and self.rearranged - self.flagged >= CLOSES * gap

    def text(self, loss: str, dataset: str) -> str:
        """What the experiment showed."""
        where = f" (run_ctx.train_flag read at {self.read_at})" if self.read_at else ""
        said = (
            f"the paths part in train_step's own branch for evaluation{where}: with the modules in eval mode as "
            f"evaluation has them but run_ctx.train_flag True, {loss} on the first train batch is {self.flagged:.4g} "
            f"instead of {self.evaluated:.4g} when evaluated as {dataset} is (training mode: {self.trained:.4g}; "
            f"{self.closed:.0%} of the gap closed)"
        )
        if self.moved:
            alike: dict[tuple, list[str]] = {}
            for m in self.moved:
                alike.setdefault((m.axis, tuple(m.row_shifts), m.padding_first), []).append(m.argument)
            first = {m.argument: m for m in self.moved}
            said += "; " + "; ".join(first[names[0]].text(names) for names in alike.values())
        if self.other:
            said += f"; the model gets other values in its argument(s) {', '.join(map(repr, self.other))}"
        if self.rearranged is not None:
            share = (self.rearranged - self.flagged) / max(self.evaluated - self.flagged, 1e-12)
            said += (
                f"; with only those moves made on the training branch (its outputs moved back), {loss} is "
                f"{self.rearranged:.4g} instead of {self.flagged:.4g}: the moves alone open {share:.0%} of the gap"
            )
        return said


class _FlagWatched(RunCtx):
    """A run context that remembers the first user source line that read ``train_flag``."""

    read_at: str | None = None

    @property
    def train_flag(self) -> bool:
        caller = sys._getframe(1)  # the step's own code, not the framework's (mark_as_loss reads it too)
        if self.read_at is None and is_user_file(caller.f_code.co_filename):
            frame = traceback.FrameSummary(caller.f_code.co_filename, caller.f_lineno, caller.f_code.co_name)
            self.read_at = format_frame(frame)
        return self.stage == "train"


def evaluation_branch(state: RunState, loss: str) -> StepBranch | None:
    """On the first train batch of this epoch, on a copy of the model in eval mode: ``train_step`` with
    ``run_ctx.train_flag`` False (as dev is evaluated) and True. A StepBranch when the flag closes at least ``CLOSES``
    of the gap to the training path, with the model inputs of both; None when it does not, or the experiment cannot
    run (a model that cannot be copied, a step that fails on the copy)."""
    return once_per_step("step branch", state, loss, lambda: _experiment(state, loss))


def _experiment(state: RunState, loss: str) -> StepBranch | None:
    with first_train_batch(state) as setting:
        if setting is None:
            return None
        copy, batch, epoch = setting

        def run(stage: str, training: bool) -> tuple[float, RunCtx, dict[str, Any]]:
            copy.train(training)
            inputs: dict[str, Any] = {}

            def keep(module: torch.nn.Module, args: tuple, kwargs: dict) -> None:
                if not inputs:
                    inputs.update(_named_arguments(module, args, kwargs))

            handle = copy.register_forward_pre_hook(keep, with_kwargs=True)
            try:
                with buffers_restored(copy):
                    run_ctx = run_step(
                        state.config, copy, batch, stage, epoch=epoch, step=state.global_step, context=_FlagWatched
                    )
            finally:
                handle.remove()
            return float(run_ctx.losses[loss].normalized()), run_ctx, inputs

        evaluated, watched, eval_inputs = run("eval", False)
        trained, _, _ = run("train", True)
        if not evaluated > trained:
            return None
        flagged, _, flag_inputs = run("train", False)
        branch = StepBranch(evaluated, flagged, trained, getattr(watched, "read_at", None))
        if branch.closed < CLOSES:
            return None
        _compare(branch, eval_inputs, flag_inputs)
        if branch.rearranges:
            # the experiment that decides: the training branch with the model's arguments moved as the evaluation
            # branch moves them, and its outputs moved back; a model that does not care where its inputs sit
            # (no absolute positions) scores as before, so the moves are not what parts the paths
            with _moved_inputs(copy, branch.moved, eval_inputs):
                branch.rearranged, _, _ = run("train", False)
    return branch


def _compare(branch: StepBranch, eval_inputs: dict[str, Any], flag_inputs: dict[str, Any]) -> None:
    """Fill ``branch.moved`` and ``branch.other`` from the model's arguments on the two branches."""
    names = set(eval_inputs) | set(flag_inputs)
    differing = {}
    for name in names:
        value, before = eval_inputs.get(name), flag_inputs.get(name)
        if isinstance(value, torch.Tensor) and isinstance(before, torch.Tensor):
            if not (value.shape == before.shape and torch.equal(value, before)):
                differing[name] = (value, before)
        elif type(value) is not type(before) or (not isinstance(value, torch.Tensor) and value != before):
            branch.other.append(name)  # an argument given on one branch only, or another value that is no tensor
    for name, (value, before) in differing.items():
        if value.shape != before.shape or value.dtype != before.dtype:
            branch.other.append(name)
        elif (moved := _moved(name, value, before)) is not None:
            branch.moved.append(moved)
    # a mask moved with the values: its real part is all one value, so only the values' moves can show it moved
    for name, (value, before) in differing.items():
        if name in {m.argument for m in branch.moved} or name in branch.other or value.shape != before.shape:
            continue
        alike = next((m for m in branch.moved if _moved_as(m, value, before)), None)
        if alike is None:
            branch.other.append(name)
        else:
            branch.moved.append(replace(alike, argument=name))


@contextlib.contextmanager
def _moved_inputs(model: torch.nn.Module, moved: list[Moved], eval_inputs: dict[str, Any]) -> Iterator[None]:
    """Within the block, ``model``'s first forward call gets the evaluation branch's values of the moved arguments,
    and each of its tensor outputs that has the moved axis's length is moved back row by row."""
    first = moved[0]
    calls = [0]

    def pre(module: torch.nn.Module, args: tuple, kwargs: dict) -> tuple[tuple, dict] | None:
        if calls[0]:
            return None
        bound = inspect.signature(module.forward).bind(*args, **kwargs)
        for m in moved:
            if m.argument in bound.arguments:
                bound.arguments[m.argument] = eval_inputs[m.argument]
        return bound.args, bound.kwargs

    def post(module: torch.nn.Module, args: tuple, output: Any) -> Any:
        calls[0] += 1
        if calls[0] > 1 or not isinstance(output, torch.Tensor) or output.dim() <= first.axis:
            return None
        length = output.shape[first.axis]
        rows = [row.roll(-s, first.axis - 1) if s else row for row, s in zip(output, first.row_shifts, strict=True)]
        return torch.stack(rows) if len(first.row_shifts) == len(output) and length else None

    handles = [
        model.register_forward_pre_hook(pre, with_kwargs=True),
        model.register_forward_hook(post),
    ]
    try:
        yield
    finally:
        for handle in handles:
            handle.remove()


def _named_arguments(module: torch.nn.Module, args: tuple, kwargs: dict) -> dict[str, Any]:
    """The arguments of a forward call by the names its signature gives them (by position where it has none)."""
    try:
        bound = inspect.signature(module.forward).bind(*args, **kwargs)
        named = dict(bound.arguments)
    except (TypeError, ValueError):
        named = {str(i): a for i, a in enumerate(args)} | dict(kwargs)
    return named


def _moved(name: str, evaluated: torch.Tensor, trained: torch.Tensor) -> Moved | None:
    """The move along one axis after the batch axis that turns each row of ``trained`` into that of ``evaluated``:
    its values ``s`` positions further along (or back), what is moved out of the row dropped and the places left
    filled with anything (padding changing sides); None when some row that differs is no such move of itself, or
    shows it only by one value matching itself (padding matching padding, a mask's real part)."""
    if evaluated.dim() < 2:
        return None
    for axis in range(1, min(evaluated.dim(), 3)):
        shifts = []
        for row_eval, row_train in zip(evaluated, trained, strict=True):
            shifts.append(0 if torch.equal(row_eval, row_train) else _row_shift(row_eval, row_train, axis - 1))
            if shifts[-1] is None:
                break
        else:
            if any(shifts):
                return Moved(name, axis, shifts, _padding_first(evaluated, axis, shifts))
    return None


def _moved_as(move: Moved, evaluated: torch.Tensor, trained: torch.Tensor) -> bool:
    """Whether ``evaluated`` is ``trained`` with each row moved as ``move`` moved that row."""
    if evaluated.dim() <= move.axis or len(evaluated) != len(move.row_shifts):
        return False
    dim = move.axis - 1
    return all(
        _shifted_by(row_eval, row_train, dim, s)
        for row_eval, row_train, s in zip(evaluated, trained, move.row_shifts, strict=True)
    )


def _padding_first(evaluated: torch.Tensor, axis: int, shifts: list[int]) -> bool:
    """Whether every row moved toward the end and the places before it hold one value (padding)."""
    for row, s in zip(evaluated, shifts, strict=True):
        if s < 0:
            return False
        if s > 0:
            filled = row.narrow(axis - 1, 0, s)
            if not bool((filled == filled.flatten()[0]).all()):
                return False
    return True


def _shifted_by(row_eval: torch.Tensor, row_train: torch.Tensor, dim: int, s: int) -> bool:
    """Whether row_eval's values from s on are row_train's from 0 on (s < 0: row_eval's from 0 on, row_train's
    from -s on)."""
    length = row_train.shape[dim]
    later, earlier, s = (row_eval, row_train, s) if s >= 0 else (row_train, row_eval, -s)
    return s < length and torch.equal(later.narrow(dim, s, length - s), earlier.narrow(dim, 0, length - s))


def _row_shift(row_eval: torch.Tensor, row_train: torch.Tensor, dim: int) -> int | None:
    """The smallest s (positive: toward the end) with ``_shifted_by``, where the values compared are not all one
    value; None when there is none."""
    length = row_train.shape[dim]
    for sign in (1, -1):
        later, earlier = (row_eval, row_train) if sign > 0 else (row_train, row_eval)
        first, tried = earlier.select(dim, 0), 0
        for s in range(1, length - 1):
            if not torch.equal(later.select(dim, s), first):
                continue
            compared = earlier.narrow(dim, 0, length - s)
            if _shifted_by(row_eval, row_train, dim, sign * s) and not bool((compared == compared.flatten()[0]).all()):
                return sign * s
            tried += 1
            if tried >= SHIFT_CANDIDATES:
                break
    return None
