"""Is training working? Warnings when the train loss does not fall, sits at its chance level, or dev diverges.

``debug_loss_window`` (steps): the train loss is judged at every epoch end, at the end of the run and
every N steps within long epochs, over its curve so far: the mean of the first N steps against the
mean of the latest N (a run shorter than 2N steps compares its first and second half, from 2 x 16
steps on, so a two-epoch smoke run is judged too). It warns when

- the loss is not decreasing (a plateau after progress is no reason to warn);
- it barely moves while the steps are far too small: no weight changes by more than 1e-5 of its
  norm per update (gradient health's measurement), or the learning rate the optimizer applied stays
  orders of magnitude below what that optimizer typically needs (a warmup indexed by epoch);
- a cross-entropy sits at its chance level (the entropy of the label frequencies): the model has
  learned nothing from its input; after a loss that went far above it first, the training diverged;
- at an epoch end, a dev loss still sits at its chance level while the train loss fell well below
  it (memorization only if the training data evaluated as dev is fell too: the diagnosis measures that).

A chance-level judgement that the run later contradicts is withdrawn (``framework.base.findings.withdraw``) at the
epoch end that shows it, saying why: a slow starter that sits at chance for an epoch and then learns (its
train loss and a dev loss left the chance level), a dev set at chance that later learns.

Each of these symptoms is handed to the differential diagnosis (``framework.debug.diagnosis``, on unless
``debug_diagnose_symptoms = False``), which names its cause in the warning instead of a guess.

The curve is kept as the engine's running epoch sums at segment ends (at most 8 steps each), copied
into a fixed buffer on the device: a step costs a counter, a segment end a copy, a judgment one host
sync. ``debug_dev_divergence_epochs`` (epochs): a dev loss that
rose that many epochs in a row while the matching train loss fell is overfitting, unless the dev or
the train loss sits at its chance level (then nothing was learned that could be overfitted);
``early_stopping_patience`` acts on it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from itertools import pairwise
from typing import Any

import torch

from framework.base import log
from framework.base.config import Config
from framework.base.findings import Finding, report, withdraw
from framework.base.options import register
from framework.check_library.model_checks import several_optimizers
from framework.check_library.schedule_trace import TINY_RATE
from framework.core.events import Event
from framework.core.measurements import CHANCE_LEVELS, DIAGNOSE, UPDATE_RATIO, ChanceLevel
from framework.core.plugin import Plugin, on
from framework.core.state import RunState
from framework.debug.diagnosis import Symptom, train_batch_losses
from framework.debug.mode_switch import evaluation_switch
from framework.debug.padding_probe import evaluation_reads_padding
from framework.debug.split_pairing import splits_differ
from framework.debug.step_branch import evaluation_branch
from framework.training.optim import base_learning_rate

register(
    "debug_loss_window",
    "int",
    200,
    "Warn when the mean train loss of the latest N steps is not below that of the first N steps (0: off).",
    __name__,
    range="[0, inf)",
)

register(
    "debug_dev_divergence_epochs",
    "int",
    2,
    "Warn of overfitting when a dev loss rose for this many epochs in a row while the train loss fell (0: off).",
    __name__,
    range="[0, inf)",
)

# The latest part must be at least this much (relatively) below the first to count as learning ...
MIN_IMPROVEMENT = 0.01
# ... and a loss that fell less than this "barely moves" (with far too small steps: the learning rate).
BARELY_MOVES = 0.05
# A run shorter than 2 windows is judged on its halves once each has this many steps (or the window, if smaller).
MIN_HALF = 16
# Steps per segment of the kept curve (at most; a divisor of the window, so window means are exact) ...
MAX_SEGMENT = 8
# ... and segments kept: beyond, neighbours are merged (and segments get twice as long).
MAX_SEGMENTS = 1024
# Before two windows, a loss rising by more than this many standard errors (of the parts' means) is named.
RISE_SIGMAS = 3.0
# A loss within this fraction of its chance level has learned nothing from the input (further above it, the
# model has not even learned the label frequencies: that is "not decreasing").
CHANCE_MARGIN = 0.03
# A train loss this fraction below its chance level while dev stays at chance: the model memorizes its labels.
MEMORIZED = 0.1
# A loss that was this many times its chance level on the way has diverged (not a plain label problem) ...
DIVERGED = 3.0
# ... and when it came back to at most this fraction above its chance level, the model collapsed to it.
SETTLED_ABOVE = 0.1
# A dev loss must rise by more than this fraction over the epochs to count as overfitting (not noise): a graph
# network's dev loss that drifted 3.8% over two epochs, 6% above its devtrain score, was a healthy run.
MIN_DEV_RISE = 0.05
# Dev at the end of epoch 1 this many times the train loss on new train batches (the last quarter of epoch 1, scored
# before their update): the splits differ before memorising could, so a later rise of dev is not shown to be overfitting.
FIRST_SIGHT_GAP = 1.5
# Updates below this fraction of a weight's norm are negligible (healthy training: around 1e-3).
TINY_UPDATE = 1e-5
# An applied learning rate this many times below what the optimizer typically needs is far too small.
FAR_BELOW = 200
# The learning rate each of torch's optimizers typically trains with (their usual starting points).
TYPICAL_LEARNING_RATES = {
    "Adam": 1e-3,
    "AdamW": 1e-3,
    "Adamax": 2e-3,
    "NAdam": 2e-3,
    "RAdam": 1e-3,
    "SparseAdam": 1e-3,
    "RMSprop": 1e-3,
    "Adagrad": 1e-2,
    "SGD": 1e-2,
    "ASGD": 1e-2,
    "Rprop": 1e-2,
    "Adadelta": 1.0,
    "LBFGS": 1.0,
}


# The fields of a chance-level judgement a checkpoint keeps, so that a resumed run can still withdraw it.
_KEPT_OF_A_JUDGEMENT = ("severity", "check", "message", "epoch", "step", "id")


def _warn(
    state: RunState,
    message: str,
    option: str = "debug_loss_window = 0",
    *,
    evidence: dict[str, Any],
    where: dict[str, Any],
    fix: str,
) -> Finding:
    """Report a learning-watch warning (``option`` turns the judgment off) with the numbers it rests on
    (``evidence``), what it is about (``where``: the loss, the dataset) and what to do (``fix``); returns it."""
    return report(
        Finding(
            "warning",
            "learning watch",
            message,
            evidence=evidence,
            where=where,
            epoch=state.epoch,
            step=state.global_step,
            fix=fix,
            option=option,
        )
    )


def typical_learning_rate(optimizer: torch.optim.Optimizer) -> tuple[str, float] | None:
    """(class name, rate) of the torch optimizer ``optimizer`` is or derives from; None for other optimizers."""
    for klass in type(optimizer).__mro__:
        if klass.__module__.startswith("torch.optim") and klass.__name__ in TYPICAL_LEARNING_RATES:
            return klass.__name__, TYPICAL_LEARNING_RATES[klass.__name__]
    return None


@dataclass
class _Part:
    """A stretch of the curve: its steps, each loss's mean, the optimized loss's (None: a loss missing), the
    highest learning rate applied at its segment ends, and its segments' sums."""

    steps: int = 0
    means: dict[str, float] = field(default_factory=dict)
    optimized: float | None = None
    lr: float = 0.0
    segments: list[dict[str, list[float]]] = field(default_factory=list)  # each segment's [sum, weight] per loss


def _noise(optimized: Callable[[dict[str, float]], float | None], *parts: _Part) -> float:
    """The standard error of the difference of the parts' means, from the spread of their segments' means
    (a part of one segment: its mean's distance to the other part's counts as noise)."""
    variance = 0.0
    for part in parts:
        means = [optimized({n: t / w for n, (t, w) in sums.items() if w > 0}) for sums in part.segments]
        means = [m for m in means if m is not None]
        if len(means) < 2:
            return abs(parts[0].optimized - parts[-1].optimized)
        center = sum(means) / len(means)
        variance += sum((m - center) ** 2 for m in means) / (len(means) - 1) / len(means)
    return variance**0.5


def _segment_length(window: int, steps_in_epoch: int) -> int:
    """The largest divisor of ``window`` that is at most MAX_SEGMENT and gives an epoch about 8 segments."""
    limit = max(1, min(MAX_SEGMENT, steps_in_epoch // 8))
    return max(d for d in range(1, limit + 1) if window % d == 0)


class LossWindowWatch(Plugin):
    """Judges the train loss curve at epoch ends, the run's end and every ``window`` steps.

    The curve is a list of segments (steps, per-loss sum and weight, the highest learning rate
    applied at its end), read from the engine's running epoch sums (``state.epoch_scores``): a
    segment's end copies them into a row of a fixed device buffer, a judgment reads the rows at once.
    """

    needs = (CHANCE_LEVELS, UPDATE_RATIO, DIAGNOSE)

    def __init__(self, window: int):
        self.window = window
        self.segment = 0  # steps per segment, chosen at the first epoch (0: not yet)
        self.steps = 0  # training steps seen
        self.in_segment = 0  # steps of the open segment
        self.base: dict[str, dict] | None = None  # the epoch sums at the latest segment end (None: zero)
        # Closed segments not read yet: steps, loss names, their sums and weights (None: in the buffer's row), lr.
        self.pending: list[tuple[int, list[str], list[float | None], float]] = []
        self.buffer: torch.Tensor | None = None  # the pending rows' sums and weights that are on the device
        self.cells: list[tuple[torch.Tensor, ...]] = []  # the buffer's entries (views), row by row
        self.segments: list[list] = []  # [steps, {loss: [sum, weight]}, highest applied learning rate]
        self.total = 0  # steps in the segments
        self.losses: dict[str, list] = {}  # marked loss name -> [scale, as_error]
        self.judged = 0  # steps at the latest judgment of the curve
        self.warned = False  # not decreasing (given again after progress)
        self.warned_lr = False  # far too small steps
        self.chance_warned: list[str] = []  # losses named at their chance level (train, or dev while train fell)
        # The chance-level judgements given and not withdrawn: (loss, dataset ("train", or the dev set at chance while
        # train fell)) -> the finding; a later epoch that contradicts one withdraws it.
        self.judged_at_chance: dict[tuple[str, str], Finding] = {}

    @classmethod
    def from_config(cls, config: Config, state: RunState) -> LossWindowWatch | None:
        window = config.int("debug_loss_window")
        if window > 0 and several_optimizers(state.optimizer):
            log.v4(
                "learning watch: the train loss curve is not judged: with several optimizers it is the sum of the "
                "players' losses, which need not fall (a GAN's, an actor's)"
            )
            return None
        return cls(window) if window > 0 else None

    def state_dict(self) -> dict[str, Any]:
        """The curve so far (plain numbers; one read of the pending sums), where the open segment started and
        the warnings given: a resumed run judges and warns as the uninterrupted one would."""
        self._flush()
        return {
            "segment": self.segment,
            "steps": self.steps,
            "in_segment": self.in_segment,
            "base": self.base,
            "segments": [[steps, {n: list(v) for n, v in sums.items()}, lr] for steps, sums, lr in self.segments],
            "losses": {name: list(meta) for name, meta in self.losses.items()},
            "judged": self.judged,
            "warned": self.warned,
            "warned_lr": self.warned_lr,
            "chance_warned": list(self.chance_warned),
            # What a withdrawal needs of each (plain values: the evidence may hold numbers of other types).
            "judged_at_chance": [
                [*key, {field: getattr(finding, field) for field in _KEPT_OF_A_JUDGEMENT}]
                for key, finding in self.judged_at_chance.items()
            ],
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Continue from ``state_dict`` (a checkpoint from before the curve keeps the warnings given only)."""
        self.warned = state["warned"]
        if "segments" not in state:  # the window watch's state: count, base, carry, first, warned, at_chance
            self.chance_warned = [name for name, count in state["at_chance"].items() if count == -1]
            return
        self.segment, self.steps, self.in_segment = state["segment"], state["steps"], state["in_segment"]
        self.base, self.judged, self.warned_lr = state["base"], state["judged"], state["warned_lr"]
        self.segments = [[steps, {n: list(v) for n, v in sums.items()}, lr] for steps, sums, lr in state["segments"]]
        self.total = sum(segment[0] for segment in self.segments)
        self.losses = {name: list(meta) for name, meta in state["losses"].items()}
        self.chance_warned = list(state["chance_warned"])
        self.judged_at_chance = {(n, d): Finding(**f) for n, d, f in state.get("judged_at_chance", [])}

    # -- keeping the curve
    @on(Event.EPOCH_START)
    def on_epoch_start(self, state: RunState) -> None:
        if not self.segment:
            self.segment = _segment_length(self.window, state.steps_in_epoch)

    @on(Event.STEP_END)
    def on_step_end(self, state: RunState) -> None:
        self.steps += 1
        self.in_segment += 1
        at_window = self.steps % self.window == 0
        if self.in_segment >= self.segment or at_window:
            self._close(state)
            # At the epoch's last step the epoch end judges, with the dev scores at hand.
            if at_window and state.step_in_epoch + 1 < state.steps_in_epoch:
                self._judge_curve(state, final=False)

    @on(Event.EPOCH_END)
    def on_epoch_end(self, state: RunState) -> None:
        if self.in_segment:
            self._close(state)
        self._flush()
        self.base = None  # the next epoch's sums start from zero
        self._judge_curve(state, final=True)
        self._judge_dev(state)
        self._withdraw_contradicted(state)

    @on(Event.FINISH)
    def on_finish(self, state: RunState) -> None:
        """The end of the run: judge the steps since the last epoch end (a run stopped within an epoch)."""
        if self.in_segment and state.epoch_scores is not None:
            self._close(state)
        self._judge_curve(state, final=True)  # nothing new since the last epoch end: judged there
        self._judge_dev(state, at_end=True)  # a run of one evaluation is judged on it

    def _close(self, state: RunState) -> None:
        """End the open segment: copy the epoch sums of the optimized losses on the device into a pending row
        (no host sync; a fixed buffer, so that no tensors pile up between judgments) and note the applied rate."""
        if state.run_ctx is not None and state.run_ctx.losses.keys() != self.losses.keys():
            self.losses = {n: [float(m.scale), bool(m.as_error)] for n, m in state.run_ctx.losses.items()}
        sums = state.epoch_scores.state_dict()
        names = [name for name in sums["sums"] if not self.losses.get(name, (1.0, False))[1]]  # no error measures
        values = [value for name in names for value in (sums["sums"][name], sums["weights"][name])]
        on_device = [value for value in values if isinstance(value, torch.Tensor)]  # detached scalars
        lr = max(float(group["lr"]) for group in state.optimizer.param_groups)
        if on_device:
            if self.buffer is None or len(self.pending) == len(self.cells) or len(on_device) != self.buffer.shape[1]:
                self._flush()
                self._allocate(on_device)
            for cell, value in zip(self.cells[len(self.pending)], on_device, strict=True):
                cell.copy_(value)  # cheaper than one stack into the row
        host = [None if isinstance(value, torch.Tensor) else float(value) for value in values]
        self.pending.append((self.in_segment, names, host, lr))
        self.in_segment = 0
        if len(self.segments) + len(self.pending) > MAX_SEGMENTS:
            self._flush()

    def _allocate(self, values: list[torch.Tensor]) -> None:
        """The pending rows' buffer for ``values``: room for a window's segments (a judgment empties it), in
        their promoted dtype (float32 sums read exactly)."""
        dtype = torch.float32
        for value in values:
            dtype = torch.promote_types(dtype, value.dtype)
        rows = max(32, self.window // max(self.segment, 1) + 2)
        self.buffer = torch.zeros(rows, len(values), dtype=dtype, device=values[0].device)
        self.cells = [row.unbind(0) for row in self.buffer.unbind(0)]

    def _flush(self) -> None:
        """Turn the pending segment ends into segments (one host sync for all of them)."""
        if not self.pending:
            return
        pending, self.pending = self.pending, []
        rows = self.buffer[: len(pending)].tolist() if self.buffer is not None else [[] for _ in pending]
        for (steps, names, host, lr), row in zip(pending, rows, strict=True):
            read = iter(row)
            values = [next(read) if value is None else value for value in host]
            before = self.base or {"sums": {}, "weights": {}}
            now = {
                "sums": dict(zip(names, values[0::2], strict=True)),
                "weights": dict(zip(names, values[1::2], strict=True)),
            }
            segment = {
                name: [total - before["sums"].get(name, 0.0), now["weights"][name] - before["weights"].get(name, 0.0)]
                for name, total in now["sums"].items()
            }
            self.base = now
            self.segments.append([steps, segment, lr])
            self.total += steps
            if len(self.segments) > MAX_SEGMENTS:
                self._merge()

    def _merge(self) -> None:
        """Halve the curve's resolution: neighbouring segments become one (segments get twice as long)."""
        merged = []
        for i in range(0, len(self.segments) - 1, 2):
            (steps_a, sums_a, lr_a), (steps_b, sums_b, lr_b) = self.segments[i], self.segments[i + 1]
            sums = {
                n: [v[0] + sums_b.get(n, [0.0, 0.0])[0], v[1] + sums_b.get(n, [0.0, 0.0])[1]] for n, v in sums_a.items()
            }
            merged.append([steps_a + steps_b, sums, max(lr_a, lr_b)])
        if len(self.segments) % 2:
            merged.append(self.segments[-1])
        self.segments = merged
        self.segment *= 2

    def _part(self, steps: int, from_end: bool) -> _Part:
        """The whole segments covering about ``steps`` steps at the start (or end) of the curve."""
        order = reversed(self.segments) if from_end else iter(self.segments)
        part, sums = _Part(), {}
        for n, segment_sums, segment_lr in order:
            if part.steps and part.steps + n > steps:
                break
            part.steps += n
            part.lr = max(part.lr, segment_lr)
            for name, (total, weight) in segment_sums.items():
                acc = sums.setdefault(name, [0.0, 0.0])
                acc[0] += total
                acc[1] += weight
            part.segments.append(segment_sums)
        part.means = {name: total / weight for name, (total, weight) in sums.items() if weight > 0}
        part.optimized = self._optimized(part.means)
        return part

    def _optimized(self, means: dict[str, float]) -> float | None:
        """The optimized loss (sum of scale x loss) from the losses' means."""
        optimized = [(name, scale) for name, (scale, as_error) in self.losses.items() if not as_error]
        if not optimized or any(name not in means for name, _ in optimized):
            return None
        return sum(scale * means[name] for name, scale in optimized)

    def _falling_parts(self, before: dict[str, float], now: dict[str, float]) -> list[str]:
        """Of several optimized losses, those whose mean fell clearly between the two windows (none for one loss:
        its fall would be the sum's)."""
        optimized = [name for name, (_, as_error) in self.losses.items() if not as_error]
        if len(optimized) < 2:
            return []
        return [
            name
            for name in optimized
            if name in before and name in now and now[name] < before[name] - MIN_IMPROVEMENT * abs(before[name])
        ]

    # -- judging it
    def _judge_curve(self, state: RunState, final: bool) -> None:
        """Far too small steps, at the chance level, not decreasing: the first part of the curve against the latest.

        From two windows on, a loss not below the first window is named (as a plateau after progress is not).
        Before, a flat loss may be a plateau that a longer run leaves (a hard function is at first predicted
        by its mean): only a loss at its chance level, one that barely moves with far too small steps, and one
        that rises beyond its noise are named. ``final``: judged at an epoch end (with its dev scores) or at
        the end of the run, not within an epoch. While a dev score improves, the train loss is learning.
        """
        self._flush()
        total = self.total
        half = min(self.window, total // 2)
        if total == self.judged or half < min(self.window, MIN_HALF):
            return
        self.judged = total
        first, last = self._part(half, from_end=False), self._part(half, from_end=True)
        before, now = first.optimized, last.optimized
        if before is None or now is None:
            return
        full = total >= 2 * self.window
        facts = (
            f"mean {now:.4g} over the last {last.steps} steps (up to step {state.global_step}) vs {before:.4g} over "
            f"the first {first.steps}."
        )
        decrease = (before - now) / abs(before) if before else 0.0
        updates, rate = self._tiny_steps(state, last.lr)
        curve = {
            "mean_first": before,
            "mean_last": now,
            "steps_first": first.steps,
            "steps_last": last.steps,
            "relative_decrease": decrease,
            "learning_rate": last.lr,
        }
        if state.store.get(UPDATE_RATIO) is not None:
            curve["update_ratio"] = state.store.get(UPDATE_RATIO)
        optimized = {"loss": self._optimized_name() or "total", "dataset": "train"}
        unknown = typical_learning_rate(state.optimizer) is None  # its usual rate unknown: the updates tell
        if decrease < BARELY_MOVES and (rate or (unknown and updates)):  # the steps explain a loss that barely moves
            if not self.warned_lr:
                self.warned_lr = True
                how = "is not decreasing" if decrease < MIN_IMPROVEMENT else "barely moves"
                conclusion = (
                    f"So the learning rate {last.lr:g} is far too small. Raise it (e.g. x100, or find it with a "
                    f"learning-rate range test)."
                    if rate
                    else f"With {type(state.optimizer).__name__} at the learning rate {last.lr:g}, either the rate is "
                    f"far too small for it or the gradients are (near) zero: raise it, or read the gradient-health "
                    f"warnings."
                )
                _warn(
                    state,
                    f"the train loss {how}: {facts} {updates}{rate or '.'} {conclusion}",
                    # A rate far below what the optimizer needs is the problem the schedule plan may have named.
                    evidence={**curve, "problem": TINY_RATE} if rate else curve,
                    where={**optimized, "optimizer": type(state.optimizer).__name__},
                    fix=f"Raise the learning rate {last.lr:g} (x100, or find it with a learning-rate range test)."
                    if rate
                    else f"Raise the learning rate {last.lr:g}, or read the gradient-health warnings.",
                )
            return
        stalled = decrease < MIN_IMPROVEMENT and updates  # no weight moves, at a usual rate: no gradient
        if not stalled and self._judge_chance(state, last.means, last.steps, final):
            return  # at its chance level: named there, whether it still decreases or not
        if now < before * (1 - MIN_IMPROVEMENT):
            self.warned = False
            return
        if _dev_improves(state):
            return
        rising = now > before * (1 + MIN_IMPROVEMENT) and now - before > RISE_SIGMAS * _noise(
            self._optimized, first, last
        )
        if self.warned or not (rising or full):
            return
        falling = self._falling_parts(first.means, last.means)
        if falling:  # the sum of several losses moves with their balance: one of them is learning
            log.v4(
                f"Learning watch: the optimized sum of the losses is {'rising' if rising else 'not decreasing'} "
                f"({facts[:-1]}), but {', '.join(falling)} fell: a trade-off between the losses, not a failure to learn."
            )
            return
        self.warned = True
        how = "rising" if rising and not full else "not decreasing"
        if stalled:
            _warn(
                state,
                f"the train loss is {how}: {facts} {updates}, although the learning rate "
                f"({last.lr:g}) is a usual one: the gradients are (near) zero. Check the sanity-check and gradient-"
                f"health warnings (a loss that does not depend on the parameters' values, weights that get no gradient).",
                evidence=curve,
                where=optimized,
                fix="Read the sanity-check and gradient-health warnings: find why the gradients are (near) zero.",
            )
            return
        if self._diagnosed(state, f"the train loss is {how}: {facts[:-1]}", self._optimized_name()):
            return
        _warn(
            state,
            f"the train loss is {how}: {facts} Check the learning rate ({last.lr:g}), the "
            f"sanity-check and gradient-health warnings, and whether the model can overfit a batch "
            f"(debug_overfit_batches = 1).",
            evidence=curve,
            where=optimized,
            fix=f"Check the learning rate ({last.lr:g}) and whether the model can overfit a batch "
            f"(debug_overfit_batches = 1).",
        )

    def _tiny_steps(self, state: RunState, lr: float) -> tuple[str, str]:
        """Why the updates are too small to matter: the update ratio (empty: not tiny) and the rate the optimizer
        applied (empty: not far below what it typically needs, or its needs are unknown)."""
        updates = ""
        update_ratio = state.store.get(UPDATE_RATIO)
        if update_ratio is not None and update_ratio < TINY_UPDATE:
            updates = (
                f"The updates are negligible: no weight changes by more than {update_ratio:.1e} of its norm per update "
                f"(|dW|/|W|; healthy training is around 1e-3)"
            )
        typical = typical_learning_rate(state.optimizer)
        if typical is None:
            return updates, ""
        name, usual = typical
        if not 0 < lr * FAR_BELOW <= usual:
            return updates, ""
        scheduled = state.learning_rate
        schedule = (
            f" and {scheduled / lr:.0f}x below the epoch's learning rate {scheduled:g}: a per-step schedule "
            f"(dynamic_learning_rate) lowers it, and a warmup indexed by the epoch instead of global_train_step gives "
            f"exactly this"
            if lr * FAR_BELOW <= scheduled
            else ""
        )
        return updates, (
            f"{'. ' if updates else ''}The optimizer applied a learning rate of at most {lr:g} in these steps, "
            f"{usual / lr:.0f}x below the {usual:g} that {name} typically needs{schedule}."
        )

    def _judge_chance(self, state: RunState, last: dict[str, float], steps: int, final: bool) -> bool:
        """Warn (once per loss) when a loss sits at its chance level and the run had a real chance to leave it;
        whether one sits there.

        A slow starter sits there too at first (a long-range dependency, a long warmup): the judgement
        waits while the learning rate still rises, within an epoch until two windows were trained, and
        is not given while a dev score says the model learned (a dev loss below the chance level, or
        dev scores that improve).
        """
        at_chance = False
        for name, level in (state.store.get(CHANCE_LEVELS) or {}).items():
            mean = last.get(name)
            if mean is None or not level.value * (1 - CHANCE_MARGIN) <= mean <= level.value * (1 + SETTLED_ABOVE):
                continue
            peak, peak_steps = self._peak(name)
            diverged = peak > DIVERGED * level.value
            # After diverging, a collapsed model predicts the label frequencies imperfectly: a little above them.
            if mean > level.value * (1 + (SETTLED_ABOVE if diverged else CHANCE_MARGIN)):
                continue
            at_chance = True
            if name in self.chance_warned:
                continue
            if not diverged and not self._had_a_chance(state, name, level, final):
                continue
            latest = [values[name] for values in _dev_scores(state)[-1:] if name in values]
            if diverged and latest and latest[0] < level.value * (1 - CHANCE_MARGIN):
                continue  # the latest evaluation shows what it learned from its input since: no collapse
            self.chance_warned.append(name)
            where = f"mean {mean:.4g} over the last {steps} steps up to step {state.global_step}"
            if diverged:
                self.judged_at_chance[(name, "train")] = _warn(
                    state,
                    f"the train loss {name!r} went far above its chance level (a mean of "
                    f"{peak:.4g} over steps {peak_steps}) and then settled at (or just above) it ({where}; {level.what} "
                    f"is {level.value:.4g}): the training diverged, and the model collapsed to predicting the label "
                    f"frequencies (units that no longer respond after huge updates); it has learned nothing from its "
                    f"input since. Lower the learning rate ({base_learning_rate(state.optimizer):g}) or clip "
                    f"gradients (gradient_clip_global_norm), and read the gradient-health warnings.",
                    evidence={
                        "mean": mean,
                        "steps": steps,
                        "peak": peak,
                        "peak_steps": peak_steps,
                        "chance": level.value,
                    },
                    where={"loss": name, "dataset": "train"},
                    fix=f"Lower the learning rate ({base_learning_rate(state.optimizer):g}) or clip gradients "
                    f"(gradient_clip_global_norm).",
                )
                continue
            symptom = (
                f"the train loss {name!r} has stayed at its chance level ({where}; {level.what} is {level.value:.4g}"
                f"{self._dev_at_chance(state, name, level)}): the model predicts the label frequencies and has learned "
                f"nothing from its input"
            )
            found = self._diagnosed(state, symptom, name)
            self.judged_at_chance[(name, "train")] = found or _warn(
                state,
                f"{symptom}. Labels that do not belong to their inputs "
                f"do exactly this (inputs and labels shuffled separately, misaligned files or orderings, a label column "
                f"from another table); so does an input that never reaches the model (detached, zeroed, the wrong key).",
                evidence={"mean": mean, "steps": steps, "chance": level.value},
                where={"loss": name, "dataset": "train"},
                fix="Check that the labels belong to their inputs and that the input reaches the model.",
            )
        return at_chance

    def _diagnosed(
        self, state: RunState, symptom: str, loss: str, train_learns: bool = False, dev: str = ""
    ) -> Finding | None:
        """Hand ``symptom`` to the differential diagnosis (framework.debug.diagnosis), which reports it in one
        finding (returned); None when it is off or could not run (then the symptom's own warning is given)."""
        diagnose = state.store.get(DIAGNOSE)
        if diagnose is None:
            return None
        self._flush()
        applied = [lr for _, _, lr in self.segments]
        return diagnose(state, Symptom(symptom, loss, applied, train_learns, dev))

    def _optimized_name(self) -> str:
        """The name of the first optimized loss (for a symptom of the total)."""
        return next((name for name, (_, as_error) in self.losses.items() if not as_error), "")

    def _had_a_chance(self, state: RunState, name: str, level: ChanceLevel, final: bool) -> bool:
        """Whether a loss at its chance level after ``self.total`` steps is a verdict rather than a slow start."""
        if self._warming_up() or (not final and self.total < 2 * self.window):
            return False
        dev = [values[name] for values in _dev_scores(state) if name in values]
        if any(value < level.value * (1 - CHANCE_MARGIN) for value in dev):
            return False  # the model learned something that carries over to dev
        # A dev loss measured at its chance level says more than dev scores that move by a percent around it (an
        # error rate of 0.500 -> 0.492 on a dev set at chance is noise); without one, an improving dev score wins.
        return bool(dev) or not _dev_improves(state)

    def _warming_up(self) -> bool:
        """Whether the applied learning rate still rises: the latest segment's is above every earlier one's."""
        if len(self.segments) < 2:
            return False
        return self.segments[-1][2] > max(lr for _, _, lr in self.segments[:-1]) * (1 + 1e-6)

    def _peak(self, name: str) -> tuple[float, str]:
        """The highest segment mean of loss ``name`` and the steps that segment ends ("1-5")."""
        peak, where, end = float("-inf"), "", 0
        for steps, sums, _ in self.segments:
            end += steps
            total, weight = sums.get(name, (0.0, 0.0))
            if weight > 0 and total / weight > peak:
                peak, where = total / weight, f"{end - steps + 1}-{end}" if steps > 1 else f"{end}"
        return peak, where

    @staticmethod
    def _dev_at_chance(state: RunState, name: str, level: ChanceLevel) -> str:
        """``; dev_ce 1.39 sits there too`` when this epoch's evaluation has the loss at its chance level."""
        scores = state.lr_control.scores.get(state.epoch, {})
        at = [
            f"{dataset}_{name} {values[name]:.4g}"
            for dataset, values in scores.items()
            if dataset != "train" and name in values and values[name] >= level.value * (1 - CHANCE_MARGIN)
        ]
        return f"; {', '.join(at)} sits there too" if at else ""

    def _judge_dev(self, state: RunState, at_end: bool = False) -> None:
        """At an epoch end: a dev loss still at its chance level, in two evaluations or more (one at the run's end),
        while the train loss fell well below it. One evaluation is too early to judge: an evaluated model that lags
        the trained one on purpose (weights averaged from a later epoch on) sits at chance after epoch 1."""
        levels = state.store.get(CHANCE_LEVELS) or {}
        scores = state.lr_control.scores
        if not levels or state.epoch not in scores or not self.segments:
            return
        last = self._part(min(self.window, max(1, self.total // 2)), from_end=True)
        for name, level in levels.items():
            train = last.means.get(name)
            if name in self.chance_warned or train is None or train > level.value * (1 - MEMORIZED):
                continue
            for dataset in scores[state.epoch]:
                history = [scores[e][dataset][name] for e in sorted(scores) if name in scores[e].get(dataset, {})]
                if dataset == "train" or not history or (len(history) < 2 and not at_end):
                    continue
                if all(value >= level.value * (1 - CHANCE_MARGIN) for value in history):
                    self.chance_warned.append(name)
                    symptom = (
                        f"{dataset}_{name} has stayed at its chance level while train_{name} fell below it: "
                        f"{dataset}_{name} {history[0]:.4g} -> {history[-1]:.4g} in {len(history)} epoch(s), "
                        f"train_{name} {train:.4g} over the last {last.steps} steps (training mode); {level.what} is "
                        f"{level.value:.4g}"
                    )
                    found = self._diagnosed(state, symptom, name, train_learns=True, dev=dataset)
                    self.judged_at_chance[(name, dataset)] = found or _warn(
                        state,
                        f"{symptom}. Not decided yet: the train loss is measured in training mode. Evaluate the "
                        f"training data as {dataset} is (eval_datasets = {{'devtrain': ...}}, or leave "
                        f"debug_diagnose_symptoms on): fell there too -> what the model learned does not carry over "
                        f"to {dataset} (labels that do not belong to their inputs, or {dataset} unlike train); at "
                        f"chance there -> the evaluation path loses what training mode learned.",
                        evidence={"dev": history, "train": train, "train_steps": last.steps, "chance": level.value},
                        where={"loss": name, "dataset": dataset},
                        fix=f"Evaluate the training data as {dataset} is (eval_datasets = {{'devtrain': ...}}) to "
                        f"tell the two causes apart.",
                    )
                    break

    def _withdraw_contradicted(self, state: RunState) -> None:
        """At an epoch end: withdraw each chance-level judgement this epoch contradicts. A train loss judged at chance
        that now sits below it, with a dev loss below it too (the model learned from its input: a slow start or a
        recovery); a dev loss judged at chance that now sits below it (what was learned carries over after all)."""
        levels = state.store.get(CHANCE_LEVELS) or {}
        scores = state.lr_control.scores.get(state.epoch, {})
        for (name, dataset), finding in list(self.judged_at_chance.items()):
            level = levels.get(name)
            if level is None:
                continue
            low = level.value * (1 - CHANCE_MARGIN)
            dev = {d: v[name] for d, v in scores.items() if d != "train" and name in v and v[name] < low}
            if dataset != "train":
                dev = {d: v for d, v in dev.items() if d == dataset}
            train = self._part(min(self.window, max(1, self.total // 2)), from_end=True).means.get(name)
            if not dev or (dataset == "train" and (train is None or train >= low)):
                continue
            left = ", ".join(f"{d}_{name} {v:.4g}" for d, v in dev.items())
            trained = f"train_{name} {train:.4g} over the latest steps, " if train is not None else ""
            del self.judged_at_chance[(name, dataset)]
            withdraw(
                finding,
                f"by epoch {state.epoch} the loss left its chance level ({trained}{left}; {level.what} is "
                f"{level.value:.4g}): the model learned from its input after all (a slow start).",
            )


def _dev_scores(state: RunState) -> list[dict[str, float]]:
    """Every evaluation's scores of every dataset other than train, by epoch."""
    scores = state.lr_control.scores
    return [values for epoch in sorted(scores) for dataset, values in scores[epoch].items() if dataset != "train"]


def _dev_improves(state: RunState) -> bool:
    """Whether a dev score (a loss or an error measure) of the latest evaluation is clearly better than the one
    before: then the model learns, whatever the train loss shows."""
    scores = state.lr_control.scores
    epochs = sorted(scores)
    if len(epochs) < 2:
        return False
    before, now = scores[epochs[-2]], scores[epochs[-1]]
    for dataset, values in now.items():
        if dataset == "train":
            continue
        for name, value in values.items():
            old = before.get(dataset, {}).get(name)
            if old is not None and value < old - MIN_IMPROVEMENT * abs(old):
                return True
    return False


class DevDivergenceWatch(Plugin):
    """Warns when a dev loss rose ``epochs`` epochs in a row while the train loss fell.

    An error measure (``as_error``) that rose counts only when no optimized loss of that dataset fell.
    Nothing is overfitted while a loss with a known chance level sits there: dev never left it (the
    labels do not belong to their inputs) or train is at it (nothing learned); the loss watch names those.
    """

    needs = (CHANCE_LEVELS,)

    def __init__(self, epochs: int):
        self.epochs = epochs
        self.warned: set[tuple[str, str]] = set()
        self.errors: set[str] = set()  # the names of the as_error losses that evaluation marked
        # Each train loss over the last quarter of epoch 1: batches scored before their update, none of them trained
        # on before (new data of the train distribution), and the running sums where that quarter began.
        self.unseen: dict[str, float] = {}
        self._quarter: dict[str, dict] | None = None

    @on(Event.STEP_END)
    def on_step_end(self, state: RunState) -> None:
        steps = state.steps_in_epoch
        # one process: under torchrun each rank's sums are its own, and ranks must decide alike on the experiment
        single = state.distributed is None
        if single and state.epoch == 1 and steps >= 8 and state.step_in_epoch + 1 == steps - steps // 4:
            self._quarter = state.epoch_scores.state_dict()  # references to the sums (they are replaced, not added to)

    @on(Event.EVAL_STEP_END)
    def on_eval_step_end(self, state: RunState) -> None:
        self.errors.update(name for name, marked in state.run_ctx.losses.items() if marked.as_error)

    @classmethod
    def from_config(cls, config: Config, state: RunState) -> DevDivergenceWatch | None:
        epochs = config.int("debug_dev_divergence_epochs")
        return cls(epochs) if epochs > 0 and not several_optimizers(state.optimizer) else None

    def state_dict(self) -> dict[str, Any]:
        """The overfitting warnings given (each is given once per run), the error measures seen, the train losses of
        new data in epoch 1 and, within that epoch's last quarter, the running sums where it began."""
        quarter = None
        if self._quarter is not None:
            quarter = {part: {n: float(v) for n, v in values.items()} for part, values in self._quarter.items()}
        return {
            "warned": sorted(list(key) for key in self.warned),
            "errors": sorted(self.errors),
            "unseen": dict(self.unseen),
            "quarter": quarter,
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Continue from ``state_dict``."""
        self.warned = {tuple(key) for key in state["warned"]}
        self.errors = set(state["errors"])
        self.unseen = dict(state.get("unseen", {}))
        self._quarter = state.get("quarter")

    @on(Event.EPOCH_END)
    def on_epoch_end(self, state: RunState) -> None:
        if self._quarter is not None:
            end, start = state.epoch_scores.state_dict(), self._quarter
            self._quarter = None
            for name, total in end["sums"].items():
                if name in start["sums"] and float(end["weights"][name] - start["weights"][name]) > 0:
                    self.unseen[name] = float(total - start["sums"][name]) / float(
                        end["weights"][name] - start["weights"][name]
                    )
            self._note_first_sight_gaps(state)
        scores = state.lr_control.scores
        recent = [scores[e] for e in range(state.epoch - self.epochs, state.epoch + 1) if e in scores]
        if len(recent) != self.epochs + 1:
            return
        for dataset, losses in recent[-1].items():
            # An error rate can creep up while the loss still falls (the model grows less sure of its
            # best guesses first): that is learning, not overfitting, as long as the dev loss improves.
            dev_loss_improves = any(
                recent[0].get(dataset, {}).get(name, value) > value
                for name, value in losses.items()
                if name not in self.errors
            )
            for name in sorted(losses, key=lambda n: n in self.errors):  # the losses first: they show a gap best
                if dataset == "train" or name not in recent[-1].get("train", {}) or (dataset, name) in self.warned:
                    continue
                dev = [s.get(dataset, {}).get(name) for s in recent]
                train = [s.get("train", {}).get(name) for s in recent]
                if None in dev or None in train or (name in self.errors and dev_loss_improves):
                    continue
                # measured from the best value so far: a slow steady rise adds up over more epochs than the window
                best = min(v for e in scores.values() if (v := e.get(dataset, {}).get(name)) is not None)
                rose = all(b > a for a, b in pairwise(dev)) and dev[-1] - best > MIN_DEV_RISE * abs(best)
                if rose and all(b < a for a, b in pairwise(train)) and not self._at_chance(state, dataset):
                    self.warned.add((dataset, name))
                    devtrain = self._devtrain(state, name)
                    # Overfitting: the train data, evaluated as dev is, scores better than dev did before it rose. A
                    # loss that is as high on the train data (a noisy objective, a policy gradient) is no overfitting.
                    if devtrain is None or devtrain < dev[0]:
                        first = scores.get(1, {}).get(dataset, {}).get(name)
                        self._warn(state, f"{dataset}_{name}", dev, f"train_{name}", train, devtrain, first, name)

    def _note_first_sight_gaps(self, state: RunState) -> None:
        """At the end of epoch 1: a dev loss FIRST_SIGHT_GAP times the loss of new train data (the epoch's last
        quarter) is a note that says whether the same train batches evaluated as dev is score as badly (the evaluation
        path differs) or not (the data differ). A note: a dev set harder by design, or decoding without the targets at
        evaluation, shows the same; the warnings come from the symptoms (a rising dev loss, the split comparison)."""
        for dataset, losses in state.lr_control.scores.get(1, {}).items():
            for name, first in losses.items():
                unseen = self._apart(name, first)
                if dataset == "train" or unseen is None:
                    continue
                try:
                    paths = train_batch_losses(state, name)
                except Exception:  # noqa: BLE001 - a model that cannot be copied: the gap alone is no finding
                    continue
                trained, evaluated = paths.get("train"), paths.get("eval")
                if trained is None or evaluated is None:
                    continue
                facts = (
                    f"{dataset}_{name} is {first:.4g} at the end of epoch 1, while train batches the model had not "
                    f"trained on scored {unseen:.4g} (the epoch's last quarter, each batch before its update); the "
                    f"first train batches score {trained:.4g} in training mode and {evaluated:.4g} evaluated as "
                    f"{dataset} is"
                )
                observed = {"dev": first, "unseen_train": unseen, "train_mode": trained, "evaluated": evaluated}
                reads = None
                paths_differ = evaluated > FIRST_SIGHT_GAP * max(trained, 1e-12)
                branch = evaluation_branch(state, name) if paths_differ else None
                if branch is not None and branch.moves_explain:
                    _warn(
                        state,
                        f"{facts}: the evaluation path scores the same train data worse, and "
                        f"{branch.text(name, dataset)}. The model computes otherwise on its inputs so arranged: "
                        f"evaluation measures it on data it never saw in that form.",
                        option="debug_dev_divergence_epochs = 0",
                        evidence=observed
                        | {
                            "train_flag_true_in_eval_mode": branch.flagged,
                            "moved": [vars(m) for m in branch.moved],
                            "flag_read_at": branch.read_at,
                            "problem": branch.problem,
                        },
                        where={
                            "score": f"{dataset}_{name}",
                            "path": "evaluation (run_ctx.train_flag False)",
                            "argument": branch.moved[0].argument,
                        },
                        fix=branch.fix,
                    )
                    continue
                if paths_differ:
                    try:
                        reads = evaluation_reads_padding(state, name)
                    except Exception:  # noqa: BLE001 - a model that cannot be copied: the gap alone is the note
                        reads = None
                if reads is not None:
                    key, added, before, after = reads
                    _warn(
                        state,
                        f"{facts}: the evaluation path scores the same train data worse, and it reads the padding: "
                        f"with {added} more padded frames after every sequence of {key!r} (as a longer batch-mate "
                        f"brings), the sequences of the first train batch evaluated as {dataset} is score {name} "
                        f"{after:.4g} instead of {before:.4g}, while through the training path (on the same copy) "
                        f"they hardly move. A sequence's result on that path depends on its batch-mates' lengths: a "
                        f"mask or the lengths not passed where train_step evaluates (run_ctx.train_flag False), such "
                        f"as an attention_mask left out of a prediction function.",
                        option="debug_dev_divergence_epochs = 0",
                        evidence=observed
                        | {
                            "padding_key": key,
                            "added_frames": added,
                            "with_more_padding": after,
                        },
                        where={
                            "score": f"{dataset}_{name}",
                            "key": key,
                            "path": "evaluation (run_ctx.train_flag False)",
                        },
                        fix=f"Pass the mask (or the lengths from {key + ':seq_len'!r}) on the evaluation path as "
                        f"training does.",
                    )
                    continue
                switched = evaluation_switch(state, name) if paths_differ else None
                if switched is not None and switched.never_updated:
                    _warn(
                        state,
                        f"{facts}: the evaluation path scores the same train data worse, and "
                        f"{switched.text(name, dataset)}",
                        option="debug_dev_divergence_epochs = 0",
                        evidence=observed
                        | {
                            "module_class": switched.cls,
                            "switched": switched.switched,
                            "initial_running_statistics": switched.stale,
                            "problem": switched.problem,
                        },
                        where={
                            "score": f"{dataset}_{name}",
                            "module": switched.modules[0],
                            "path": "evaluation (eval mode)",
                        },
                        fix=switched.fix,
                    )
                    continue
                if paths_differ:
                    where = f"; {switched.text(name, dataset)}" if switched is not None else ""
                    where += f"; {branch.text(name, dataset)}" if branch is not None else ""
                    text = (
                        f"{facts}: the evaluation path scores the same train data worse, so the gap is between the "
                        f"paths (eval mode, or what train_step does when run_ctx.train_flag is False), not between the "
                        f"data{where.rstrip('.')}. Intended for decoding without the targets, EMA weights or an "
                        f"eval-only branch; otherwise make the evaluation compute as training does."
                    )
                else:
                    text = (
                        f"{facts}: the evaluation path agrees on the train data, so train and {dataset} data differ "
                        f"(their inputs, labels or preparation; by design for a harder {dataset} set). The startup "
                        f"comparison of the splits (debug_split_pairing) says how, where one shape explains it."
                    )
                report(
                    Finding(
                        "note",
                        "learning watch",
                        text,
                        evidence=observed,
                        where={"score": f"{dataset}_{name}"},
                        epoch=state.epoch,
                        step=state.global_step,
                        option="debug_dev_divergence_epochs = 0",
                    )
                )

    def _apart(self, name: str, first: float | None) -> float | None:
        """The loss ``name`` of new train data in epoch 1, when a dev value ``first`` at the end of that epoch is
        FIRST_SIGHT_GAP times it or more (not for error rates: their ratio says little near 0); else None."""
        unseen = None if name in self.errors else self.unseen.get(name)
        if first is None or unseen is None or not 0 < unseen * FIRST_SIGHT_GAP < first:
            return None
        return unseen

    @staticmethod
    def _at_chance(state: RunState, dataset: str) -> bool:
        """Whether a loss with a known chance level says nothing was learned: ``dataset`` never left it in any
        epoch, or train sits at it (or above) in this one."""
        scores = state.lr_control.scores
        for name, level in (state.store.get(CHANCE_LEVELS) or {}).items():
            low = level.value * (1 - CHANCE_MARGIN)
            history = [scores[e][dataset][name] for e in sorted(scores) if name in scores[e].get(dataset, {})]
            train = scores.get(state.epoch, {}).get("train", {}).get(name)
            if (history and min(history) >= low) or (train is not None and train >= low):
                return True
        return False

    @staticmethod
    def _devtrain(state: RunState, name: str) -> float | None:
        """``name`` over the first train batches evaluated as dev is (None: not measured)."""
        try:
            return train_batch_losses(state, name).get("eval")
        except Exception:  # noqa: BLE001 - a model that cannot be copied: the claim rests on the curves alone
            return None

    def _warn(
        self,
        state: RunState,
        key: str,
        dev: list[float],
        train_key: str,
        train: list[float],
        devtrain: float | None,
        first: float | None = None,
        name: str = "",
    ) -> None:
        """Overfitting, unless dev was already further from train than new train data in epoch 1 (``first``: dev's
        ``name`` then; the unseen train loss of that epoch): then "not shown to be overfitting"."""
        rose = (
            f"{key} rose for {self.epochs} epochs ({dev[0]:.4g} -> {dev[-1]:.4g} since epoch "
            f"{state.epoch - self.epochs}) while {train_key} fell ({train[0]:.4g} -> {train[-1]:.4g})."
        )
        evidence: dict[str, Any] = {"dev": dev, "train": train, "epochs": self.epochs}
        if devtrain is not None:
            evidence["devtrain"] = devtrain
        dataset = key[: -len(name) - 1] if name and key.endswith("_" + name) else key
        unseen = self._apart(name, first)
        epoch_1 = state.lr_control.scores.get(1, {}).get(dataset, {})
        if unseen is None and any(self._apart(n, value) is not None for n, value in epoch_1.items()):
            # another score of this dataset shows it apart from new train data in epoch 1: the run does not call its
            # rise overfitting on a score that cannot show that (an error rate over noisy train labels)
            log.v5(f"Dev divergence: {rose} Not called overfitting: {dataset} was apart from train in epoch 1.")
            return
        if unseen is not None:
            evaluated = f"; the train data evaluated as dev is gives {devtrain:.4g} now" if devtrain is not None else ""
            experiment = (
                f"compare the splits: the startup sanity check's comparison of the inputs of each class "
                f"(debug_split_pairing), and python tools/dump-dataset.py CONFIG --dataset {dataset} against --dataset "
                f"train; or train on a part of train and evaluate another part (eval_datasets): scores like dev there "
                f"-> overfitting after all."
            )
            fix = f"Run the next experiment: {experiment}"
            message = (
                f"{rose} Not decided yet, and not shown to be overfitting: already in epoch 1, before the model had "
                f"seen any train sequence twice, train batches it had not trained on scored {name} {unseen:.4g} (the "
                f"last quarter of epoch 1, each batch before its update, in training mode) and {dataset} scored "
                f"{first:.4g} at the end of that epoch{evaluated}. {dataset.capitalize()} was further from what the "
                f"model learned than new train data, before memorising could make a difference: train and {dataset} "
                f"differ (their inputs, their labels, or how each split is prepared), by design or by a bug. Next "
                f"experiment: {experiment}"
            )
            evidence |= {"unseen_train_epoch_1": unseen, "dev_epoch_1": first, "problem": splits_differ(dataset)}
        else:
            backed = (
                f" The train data evaluated as dev is gives {devtrain:.4g} (the first train batches): the model does "
                f"better on what it trained on."
                if devtrain is not None
                else ""
            )
            fix = "Regularize (dropout, weight decay, more data) or stop early (early_stopping_patience)."
            message = f"overfitting: {rose}{backed} {fix}"
        _warn(
            state,
            message,
            option="debug_dev_divergence_epochs = 0",
            evidence=evidence,
            where={"score": key, "train_score": train_key},
            fix=fix,
        )


PLUGINS = (LossWindowWatch, DevDivergenceWatch)
