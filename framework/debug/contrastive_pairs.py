"""Do a contrastive loss's targets pair each row with its own example? (``debug_contrastive_pairs``, on by default.)

A contrastive loss (SimCLR's NT-Xent, InfoNCE, CLIP's) is a ``cross_entropy`` over a matrix of similarities between
rows, whose target for row i is the column of its positive: the other view of the same example. The targets are made
in the step (``arange`` arithmetic), so an index that assumes another layout of the views (interleaved where they are
concatenated, an offset of the wrong size) makes every positive a view of another example: the loss then pulls
unrelated examples together and pushes each from its own other view, and nothing fails.

Information kept through the step: before the first step, on a copy in training mode, with gradients to the batch's
dense input keys, ``train_step`` runs once watching ``cross_entropy`` calls over a [rows, columns] score matrix whose
integer targets are no value of the batch (made in the step). For a few rows, the gradient of the target's score
into the inputs says which examples that score is computed from: one (the row and its positive are views of the same
example, or scores over classes) or two. When nearly every target pairs two different examples, and the batch's own
labels do not say those examples belong together (supervised contrastive learning pairs examples of a class), the
targets are named with the examples they pair. Before that trace, on the watched run's own scores: a square matrix
whose rows hold, for nearly every row, the same scores as their target's row in every other column has positives that
are exact copies of their rows (both views from one augmentation draw): the loss then teaches no invariance.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import torch
import torch.nn.functional as F
from torch.overrides import TorchFunctionMode

from framework.base import log
from framework.base.config import Config
from framework.base.errors import ModelCheckError
from framework.base.findings import Finding
from framework.base.options import register
from framework.check_library.probe import PROBE_SESSION, ProbeLimit, ProbeSession
from framework.check_library.tensors import format_frame, same_values, user_frame
from framework.core.run_ctx import RunCtx
from framework.core.state import RunState
from framework.debug.first_step import SharedRunCheck
from framework.debug.sanity import report_findings

CHECK = "contrastive-pairs check"
register(
    "debug_contrastive_pairs",
    "bool",
    True,
    "Before the first step, on a copy: a cross_entropy over a similarity matrix whose step-made targets pair nearly "
    "every row with a view of another example (positive indices that assume another layout of the views), or with "
    "an exact copy of itself (both views from one augmentation draw).",
    __name__,
)

ROWS = 8  # target scores traced per call
MOSTLY = 0.75  # this share of the traced targets pairing two examples makes the finding
SAME_LABEL = 0.9  # ... unless the batch's labels put this share of the pairs in one class (supervised contrastive)
RELATIVE = 0.1  # an example whose input gradient reaches this share of the largest one is a source of the score
CALLS = 2  # candidate cross_entropy calls traced per step (a loss and its symmetric twin, as CLIP's)


class _Watch(TorchFunctionMode):
    """Keeps the cross_entropy calls over a 2-D score matrix whose targets the step made."""

    def __init__(self, batch: dict[str, torch.Tensor]):
        super().__init__()
        self.batch = [t for t in batch.values() if isinstance(t, torch.Tensor)]
        self.calls: list[tuple[torch.Tensor, torch.Tensor, str]] = []

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        if func is F.cross_entropy and len(self.calls) < CALLS:
            scores = args[0] if args else kwargs.get("input")
            target = args[1] if len(args) > 1 else kwargs.get("target")
            if (
                isinstance(scores, torch.Tensor)
                and isinstance(target, torch.Tensor)
                and scores.dim() == 2
                and target.dim() == 1
                and not target.is_floating_point()
                and len(target) == len(scores) >= 4
                and scores.requires_grad
                and not any(same_values(target, t) for t in self.batch)
            ):
                self.calls.append((scores, target.detach(), format_frame(user_frame())))
        return out


def _dense_keys(state: RunState) -> list[str]:
    """The batch's dense floating input keys: where the traced run takes gradients."""
    return [
        name
        for name, declared in state.extern_data.items()
        if declared.sparse_dim is None
        and isinstance(state.batch.get(name), torch.Tensor)
        and state.batch[name].is_floating_point()
    ]


class ContrastivePairs(SharedRunCheck):
    """Watches the first step's shared run for cross_entropy calls with step-made targets over a matrix between rows;
    only when one is seen, traces on a copy with gradients to the inputs which examples each target pairs."""

    check = CHECK
    bug_check = ("debug_contrastive_pairs",)

    @classmethod
    def from_config(cls, config: Config, state: RunState) -> ContrastivePairs | None:
        return cls() if config.bool("debug_contrastive_pairs") else None

    def applies(self, state: RunState) -> bool:
        return len(state.batch_indices) >= 4 and bool(_dense_keys(state))

    @contextlib.contextmanager
    def observe(self, state: RunState, model: torch.nn.Module) -> Iterator[_Watch]:
        with _Watch(state.batch) as watch:
            yield watch

    def conclude(self, state: RunState, seen: _Watch, run_ctx: RunCtx | None) -> None:
        if not seen.calls:
            return  # no candidate: the traced run (a backward pass per target) is spared
        copies = next(filter(None, (_identical_views(*call) for call in seen.calls)), None)
        if copies is not None:
            report_findings(
                state, "first step", [copies], ModelCheckError, False, off="debug_contrastive_pairs = False"
            )
            return
        seen.calls.clear()
        session = state.store.get(PROBE_SESSION)
        size = len(state.batch_indices)
        # every integer key with one value per sequence can say which examples belong together
        labels = [
            t
            for t in state.batch.values()
            if isinstance(t, torch.Tensor) and not t.is_floating_point() and t.shape == (size,)
        ]
        try:
            finding = self._trace(session, dict(state.batch), _dense_keys(state), labels, size)
        except ProbeLimit as exc:
            log.v5(f"Contrastive-pairs check skipped: the traced run failed ({exc}).")
            return
        if finding is not None:
            report_findings(
                state, "first step", [finding], ModelCheckError, False, off="debug_contrastive_pairs = False"
            )

    @staticmethod
    def _trace(
        session: ProbeSession, batch: dict[str, Any], keys: list[str], labels: list[torch.Tensor], size: int
    ) -> Finding | None:
        leaves = [batch[k].detach().clone().requires_grad_() for k in keys]
        batch.update(zip(keys, leaves, strict=True))
        with session.isolated(CHECK, train=True) as model, torch.enable_grad():
            watch = _Watch(batch)
            with watch:
                session.changed_run(CHECK, model, batch, stage="train")
            for scores, target, where in watch.calls:
                rows = [i for i in range(len(target)) if 0 <= int(target[i]) < scores.shape[1]]
                rows = rows[:: max(1, len(rows) // ROWS)][:ROWS]
                pairs, two, layouts, misses = [], [], [], 0
                for i in rows:
                    pair = _sources(scores[i, int(target[i])], leaves, size)
                    pairs.append(pair)
                    # scores between rows: another column of the row is computed from another example (class
                    # logits of mixed inputs share the row's sources in every column, and are no pairing of rows)
                    other = (
                        _sources(scores[i, _other_column(scores, i, int(target[i]))], leaves, size)
                        if len(pair) == 2
                        else set()
                    )
                    # the row's own other view is in the matrix, where another layout of the views puts it: the
                    # column whose score comes from one example (a prototype or a class has no such column)
                    own = _own_column(scores, i, int(target[i]), leaves, size) if other and other != pair else None
                    if len(pair) == 2 and own is not None:
                        two.append(pair)
                        layouts.append(own)
                    else:
                        misses += 1
                    if misses > (1 - MOSTLY) * len(rows):
                        break  # cannot reach MOSTLY: each traced score is a backward pass, spared
                if len(rows) < 4 or len(two) < MOSTLY * len(rows):
                    continue
                if any(_share_a_label(two, label) >= SAME_LABEL for label in labels):
                    continue  # examples of one class paired on purpose (supervised contrastive learning)
                shown = "; ".join(
                    f"row {i} -> column {int(target[i])}: examples {sorted(p)}"
                    for i, p in [(i, p) for i, p in zip(rows, pairs, strict=True) if p in two][:3]
                )
                return Finding(
                    "warning",
                    "sanity check",
                    f"The targets of cross_entropy at {where} pair rows with views of other examples: the scores are "
                    f"a [{scores.shape[0]}, {scores.shape[1]}] matrix between rows, its targets are made in the step, "
                    f"and for {len(two)} of the {len(rows)} targets traced, the target's score is computed from two "
                    f"different examples of the batch (by its gradient into the inputs; {shown}, ...). Each row's "
                    f"positive is then a view of another example: the loss pulls unrelated examples together and "
                    f"pushes each row from its own other view, which the matrix holds in column {layouts[0][1]} "
                    f"({LAYOUTS[layouts[0][0]]}, found so for {layouts.count(layouts[0])} of them).",
                    evidence={
                        "traced": len(rows),
                        "pairing_two_examples": len(two),
                        "matrix": list(scores.shape),
                        "own_view_layout": layouts[0][0],
                    },
                    where={"loss": "cross_entropy", "at": where},
                    fix=f"Build each row's target index from the layout the views were stacked in: {LAYOUTS[layouts[0][0]]}.",
                )
        return None


def _identical_views(scores: torch.Tensor, target: torch.Tensor, where: str) -> Finding | None:
    """A square matrix of scores between rows whose rows and their targets' rows hold the same scores in every other
    column, for nearly every row: each row's positive is an exact copy of it (both views from one augmentation draw,
    or none), while other rows differ (the features have not collapsed)."""
    rows = scores.shape[0]
    if scores.shape[1] != rows:
        return None
    scores = scores.detach().float()
    finite = torch.isfinite(scores)
    scale = float(scores[finite].abs().max()) if bool(finite.any()) else 0.0
    if scale == 0:
        return None
    # each row against its target's row and against another row, over the columns finite in both and not theirs
    index = torch.arange(rows, device=scores.device)
    target = target.to(scores.device).long()
    valid = (target >= 0) & (target < rows) & (target != index)
    if int(valid.sum()) < 4:
        return None
    rows_i, rows_t = index[valid], target[valid]
    rows_o = torch.where((rows_t + 1) % rows != rows_i, (rows_t + 1) % rows, (rows_t + 2) % rows)
    tolerance = 1e-5 * scale

    def agree(a: torch.Tensor, b: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        keep = finite[a] & finite[b]
        for k in (a, b, rows_t):
            keep[torch.arange(len(a), device=keep.device), k] = False
        close = ((scores[a] - scores[b]).abs() <= tolerance) | ~keep
        return close.all(1), keep.any(1)

    equal, comparable = agree(rows_i, rows_t)
    alike, _ = agree(rows_i, rows_o)
    checked = int(comparable.sum())
    same = int((equal & comparable & ~alike).sum())
    if checked < 4 or same < MOSTLY * checked:
        return None
    return Finding(
        "warning",
        "sanity check",
        f"The two views of each example are identical: the scores at {where} are a [{rows}, {rows}] matrix between "
        f"rows whose targets are made in the step, and for {same} of its {checked} rows the target's row holds the "
        f"same scores as the row itself in every other column, while other rows differ: each row's positive is an "
        f"exact copy of it (both views come from one augmentation draw, from none, or from one too weak to change "
        f"most examples). The loss is then minimised by "
        f"any feature that tells the examples apart, nuisance included, and nothing teaches the invariances the views "
        f"were meant to teach.",
        evidence={"rows_checked": checked, "identical_pairs": same, "matrix": [rows, rows]},
        where={"loss": "cross_entropy", "at": where},
        fix="Draw the augmentation separately for each view (one random transform per view, not one for both), "
        "strong enough to change every example.",
    )


# where a row's other view sits, by how the views were stacked: N is half the rows
LAYOUTS = {
    "concatenated": "views concatenated as [all first views, all second views]: row i's positive is i + N modulo 2N",
    "interleaved": "views interleaved as [x_0, x'_0, x_1, x'_1, ...]: row i's positive is i ^ 1",
}


def _own_column(
    scores: torch.Tensor, row: int, target: int, leaves: list[torch.Tensor], size: int
) -> tuple[str, int] | None:
    """The layout whose column for ``row`` (other than its target) holds a score computed from one example alone: the
    row's own other view; None when no layout's does."""
    rows, columns = scores.shape
    for layout, column in (("concatenated", (row + rows // 2) % rows), ("interleaved", row ^ 1)):
        if rows % 2 or column in (row, target) or column >= columns or not bool(torch.isfinite(scores[row, column])):
            continue
        if len(_sources(scores[row, column], leaves, size)) == 1:
            return layout, column
    return None


def _other_column(scores: torch.Tensor, row: int, target: int) -> int:
    """A column of ``row`` other than its target and itself, with a finite score (not a masked diagonal)."""
    columns = scores.shape[1]
    for step in range(1, columns):
        column = (target + step) % columns
        if column != row and bool(torch.isfinite(scores[row, column])):
            return column
    return target


def _sources(score: torch.Tensor, leaves: list[torch.Tensor], size: int) -> set[int]:
    """The examples (rows of the batch's inputs) whose input gradient of ``score`` reaches RELATIVE of the largest."""
    grads = torch.autograd.grad(score, leaves, retain_graph=True, allow_unused=True)
    magnitude = torch.zeros(size)
    for grad in grads:
        if grad is not None and grad.shape[:1] == (size,):
            magnitude = torch.maximum(magnitude, grad.detach().abs().reshape(size, -1).amax(1).float().cpu())
    top = float(magnitude.max())
    return {k for k in range(size) if top > 0 and float(magnitude[k]) >= RELATIVE * top}


def _share_a_label(pairs: list[set[int]], label: torch.Tensor) -> float:
    """The share of the example pairs whose two examples have the same value of ``label``."""
    same = [int(label[a]) == int(label[b]) for a, b in (sorted(p) for p in pairs)]
    return sum(same) / max(len(same), 1)


PLUGINS = (ContrastivePairs,)
