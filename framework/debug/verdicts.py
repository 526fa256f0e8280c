"""Verdict runs: can the model learn at all? ``debug_overfit_batches`` and ``debug_synthetic_data``.

``debug_overfit_batches = N`` trains ``debug_overfit_steps`` steps on the first N batches (in
dataset order) and says whether the loss reached near zero: a model that cannot memorize a few
batches has a bug in the model, the loss or the optimization. ``debug_synthetic_data = True``
trains on synthetic data of the same ``extern_data`` with a learnable relation and evaluates on
a synthetic dev set: learns -> look at the real data; does not learn -> look at the model.

A verdict has three outcomes, judged by the way left down to the loss's floor (where known, else
0): LEARNS (at most the option's ratio left), NOT DECIDED yet (the loss fell several-fold, or close
enough that the current rate would get there within as long again, and still falls: how much, and
how many more steps or epochs would decide) and does NOT learn.

Both runs leave the real training alone: no checkpoints, no evaluation datasets, no user
``callbacks``, TensorBoard in a subdirectory named after the run. They exit with status 1 when
the model does not learn, so they can gate a script; "not decided" exits with 0.
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from framework.base import log
from framework.base.config import Config
from framework.base.errors import ConfigError, FrameworkError
from framework.base.findings import standing
from framework.base.options import register
from framework.check_library.probe import model_copy, parameters_kept
from framework.core.events import Event, Order
from framework.core.measurements import CHANCE_LEVELS, LOSS_FLOORS, VERDICT_RUN
from framework.core.plugin import Plugin, on
from framework.core.run_ctx import RunCtx
from framework.core.scores import ScoreAccumulator, format_scores
from framework.core.state import RunState
from framework.core.step import run_step
from framework.datasets import init_dataset
from framework.datasets.batching import make_batches
from framework.datasets.extern_data import extern_data_from_dataset, parse_extern_data
from framework.datasets.synthetic_like import SyntheticLike, reference_stats

register(
    "debug_overfit_batches",
    "int | None",
    None,
    "Train on the first N batches only (no shuffling, no checkpoints) and say whether the loss reaches near zero.",
    __name__,
    range="[1, inf)",
)

register("debug_overfit_steps", "int", 300, "Steps of a debug_overfit_batches run.", __name__, range="[1, inf)")

register(
    "debug_overfit_loss_ratio",
    "float",
    0.15,
    "debug_overfit_batches verdict 'learns': the final loss is at most this fraction of the first, both above the loss's floor.",
    __name__,
    range="(0, 1]",
)

register(
    "debug_synthetic_data",
    "bool",
    False,
    "Swap train/dev for synthetic data of the same extern_data with a learnable relation; say whether the model learns it.",
    __name__,
)

register(
    "debug_synthetic_loss_ratio",
    "float",
    0.5,
    "debug_synthetic_data verdict 'learns': the final dev loss is at most this fraction of the untrained model's, above the floor.",
    __name__,
    range="(0, 1]",
)

SPARK = "▁▂▃▄▅▆▇█"
MAX_SYNTHETIC_SEQS = 2000
# A loss still falls when the way left to its floor shrank by at least this fraction over the last quarter of
# the steps (the last epoch of a synthetic-data run).
STILL_FALLING = 0.03
# Not decided yet (rather than "does not learn") while still falling: at most this much of the way left
# (fell at least 3-fold towards the floor), or the current rate reaching 'learns' within as many steps again.
UNDECIDED_LEFT = 1 / 3


class VerdictError(FrameworkError):
    """The verdict run found that the model does not learn."""


def _leave_real_run_alone(config: Config, run: str, **changes: Any) -> dict[str, Any]:
    """The option values with which a verdict run touches nothing of the real training: no checkpoints,
    no user callbacks (they may write files), no eval sets, TensorBoard in a subdirectory of its own."""
    if config.get("debug_overfit_batches") and config.bool("debug_synthetic_data"):
        raise ConfigError("debug_overfit_batches and debug_synthetic_data are two separate runs; set one of them.")
    tensorboard_dir = config.get("tensorboard_dir") or config.get("tf_log_dir")
    if tensorboard_dir:
        changes["tensorboard_dir"] = os.path.join(tensorboard_dir, run)
    return dict(
        model=None,
        eval=None,
        eval_datasets=None,
        early_stopping_patience=None,
        callbacks={},
        tf_log_dir=None,
        **changes,
    )


def _eval_steps(
    state: RunState, batches: Iterable[tuple[Any, dict[str, torch.Tensor]]]
) -> Iterator[tuple[Any, RunCtx]]:
    """``train_step`` in eval mode without gradients on each ``(indices, batch)``, as a verdict scores the model.

    It runs on a copy of the model, so that the verdict's own scoring leaves the user's modules (their
    Python state, buffers, mode) as training left them; a model that cannot be copied is scored itself.
    """
    try:
        model = model_copy(state.model)
    except Exception:  # a lock or an open file in the model: score the model itself, its mode restored after
        model = state.model
    was_training = model.training
    model.eval()
    try:
        with torch.no_grad(), parameters_kept(state.model, "A verdict's scoring"):  # the copy shares the parameters
            for indices, batch in batches:
                yield indices, run_step(state.config, model, batch, "eval", epoch=state.epoch, step=state.global_step)
    finally:
        model.train(was_training)


def sparkline(values: list[float]) -> str:
    """``█▆▃▁▁`` for a curve (min..max of the values)."""
    low, high = min(values), max(values)
    scale = (len(SPARK) - 1) / (high - low) if high > low else 0.0
    return "".join(SPARK[int(round((v - low) * scale))] for v in values)


def loss_floor(state: RunState, run_ctx: Any) -> float:
    """The least the optimized total loss can reach: the sum of the known floors (soft targets' entropy), else 0."""
    return sum(
        m.scale * (state.store.get(LOSS_FLOORS) or {}).get(n, 0.0) for n, m in run_ctx.losses.items() if not m.as_error
    )


def remaining(first: float, final: float, floor: float) -> float:
    """How much of the way from ``first`` down to ``floor`` is left at ``final`` (0: at the floor)."""
    return (final - floor) / (first - floor) if first > floor else float("inf")


def _floor_text(floor: float) -> str:
    return f", above its floor of {floor:.4g} (the entropy of the soft targets)" if floor > 0 else ""


@dataclass
class Trend:
    """How the loss moved at the end of a verdict run, and what that rate would take to reach 'learns'."""

    before: float  # the mean of the next-to-last unit (quarter of the steps, or epoch)
    last: float  # the mean of the last one
    factor: float  # how much of the way left to the floor the last unit kept (1: none gone)
    unit: int  # steps per unit (1 for epochs)
    more: int | None  # units at that rate until 'learns' (None: not falling)

    @property
    def falling(self) -> bool:
        return self.more is not None


def trend(before: float, last: float, floor: float, left: float, ratio: float, unit: int = 1) -> Trend:
    """The trend from ``before`` to ``last`` (one unit apart) with ``left`` of the way left now."""
    factor = (last - floor) / (before - floor) if before > floor and last >= floor else 1.0
    more = None
    if factor <= 1 - STILL_FALLING:
        more = 0 if left <= ratio else math.ceil(math.log(ratio / left) / math.log(factor)) if factor > 0 else 1
    return Trend(before, last, factor, unit, more)


def curve_trend(losses: list[float], floor: float, left: float, ratio: float) -> Trend:
    """The trend of a training curve over its last two quarters."""
    quarter = max(len(losses) // 4, 1)
    before = float(np.mean(losses[-2 * quarter : -quarter] or losses[:1]))
    return trend(before, float(np.mean(losses[-quarter:])), floor, left, ratio, quarter)


def undecided(left: float, run: int, shape: Trend) -> bool:
    """Still falling after several-fold progress, or at a rate that gets to 'learns' within as long again."""
    return shape.falling and (left <= UNDECIDED_LEFT or shape.more * shape.unit <= run)


def _nice(n: float) -> int:
    """``n`` rounded up to one significant digit (640 -> 700)."""
    power = 10 ** max(0, math.floor(math.log10(max(n, 1))))
    return math.ceil(n / power) * power


def _falling_text(shape: Trend, what: str) -> str:
    """``-14% of the way over the last 75 steps (1.176e+04 -> 1.011e+04)``."""
    return f"{shape.factor - 1:+.0%} of the way left over the last {what} ({shape.before:.4g} -> {shape.last:.4g})"


def still_falling(losses: list[float], floor: float = 0.0, left: float = 1.0, ratio: float = 0.15) -> str:
    """A hint for a curve that is still going down at its end (the run may just be too short)."""
    shape = curve_trend(losses, floor, left, ratio)
    if not shape.falling:
        return ""
    return (
        f" The loss was still falling at the end, too slowly: {_falling_text(shape, f'{shape.unit} steps')}; at "
        f"that rate 'learns' would take about {shape.more * shape.unit} more steps."
    )


def curve(losses: list[float], points: int = 40) -> str:
    """The loss curve: a sparkline of segment means and a few values with their steps."""
    segments = np.array_split(np.asarray(losses), min(points, len(losses)))
    means = [float(s.mean()) for s in segments]
    marks = sorted({0, len(losses) // 4, len(losses) // 2, 3 * len(losses) // 4, len(losses) - 1})
    return f"{sparkline(means)}  " + ", ".join(f"step {i}: {losses[i]:.4g}" for i in marks)


class RepeatedBatches:
    """A train loader whose every epoch is the first ``num_batches`` batches, repeated for ``steps`` steps."""

    def __init__(self, loader: Any, num_batches: int, steps: int):
        self.loader = loader
        self.dataset = loader.dataset
        order = loader.within_length_limits(np.arange(self.dataset.num_seqs))  # dataset order: no shuffling
        self.batches = make_batches(order, loader.batch_lengths(), loader.batch_size, loader.max_seqs)[:num_batches]
        self.steps = steps

    def plan(self, epoch: int) -> list[np.ndarray]:
        return [self.batches[i % len(self.batches)] for i in range(self.steps)]

    def iterate(self, plan: list[np.ndarray]) -> Any:
        return self.loader.iterate(plan)

    def first_batch(self, epoch: int) -> dict[str, torch.Tensor] | None:
        """The first repeated batch on the device (what a check that needs one batch of the epoch gets)."""
        return next(iter(self.iterate(self.batches[:1])))[1] if self.batches else None


class OverfitVerdict(Plugin):
    """``debug_overfit_batches``: swap in the repeated batches, record the loss, judge at the end.

    The batches are swapped at STARTUP after the sanity check (Order.CHECK) looked at the real data.
    """

    needs = (LOSS_FLOORS, CHANCE_LEVELS)
    provides = (VERDICT_RUN,)

    def __init__(self, config: Config):
        self.num_batches = config.int("debug_overfit_batches")
        self.steps = config.int("debug_overfit_steps")
        self.ratio = config.float("debug_overfit_loss_ratio")
        self.losses: list[torch.Tensor] = []
        self.repeated: RepeatedBatches | None = None
        self.untrained = 0.0
        self.floor = 0.0
        self.marked: dict[str, Any] = {}  # the marked losses (name -> MarkedLoss) of the latest step

    @on(Event.STARTUP, Order.FIRST)
    def announce(self, state: RunState) -> None:
        state.store.put(VERDICT_RUN, "debug_overfit_batches", by=self)

    @classmethod
    def prepare(cls, config: Config) -> dict[str, Any]:
        if not config.get("debug_overfit_batches"):
            return {}
        return _leave_real_run_alone(config, "debug_overfit_batches", dev=None, num_epochs=1)

    @classmethod
    def from_config(cls, config: Config, state: RunState) -> OverfitVerdict | None:
        return cls(config) if config.get("debug_overfit_batches") else None

    @on(Event.STARTUP)
    def use_first_batches(self, state: RunState) -> None:
        repeated = self.repeated = RepeatedBatches(state.loaders["train"], self.num_batches, self.steps)
        self.num_batches = len(repeated.batches)
        state.control.use_loader("train", repeated)
        self.untrained = self.memorized_loss(state)
        log.v3(
            f"debug_overfit_batches: training {self.steps} steps on the first {self.num_batches} batch(es) of "
            f"{repeated.dataset.name} ({sum(len(b) for b in repeated.batches)} sequences), without checkpoints."
        )

    def memorized_loss(self, state: RunState) -> float:
        """The loss on the batches in eval mode: what the model memorized, without dropout's noise."""
        totals = []
        for _, run_ctx in _eval_steps(state, self.repeated.iterate(self.repeated.batches)):
            totals.append(run_ctx.total_loss().float())
        self.floor = loss_floor(state, run_ctx)  # floors are known after the first training step
        self.marked = dict(run_ctx.losses)
        return float(torch.stack(totals).mean())

    @on(Event.STEP_END)
    def record(self, state: RunState) -> None:
        with torch.no_grad():
            self.losses.append(state.run_ctx.total_loss().detach().float())

    @on(Event.FINISH)
    def judge(self, state: RunState) -> None:
        losses = torch.stack(self.losses).tolist()
        first, final = self.untrained, self.memorized_loss(state)
        ratio = remaining(first, final, self.floor)
        facts = (
            f"the loss on the first {self.num_batches} batch(es) (eval mode) went from {first:.4g} to {final:.4g}"
            f"{_floor_text(self.floor)} (x{ratio:.3g} of the way left; 'learns' needs x{self.ratio:g} or less) in "
            f"{len(losses)} steps. Training loss curve: {curve(losses)}"
        )
        if ratio <= self.ratio:
            log.v3(
                f"debug_overfit_batches verdict: the model LEARNS: {facts}. It can fit data; if real training "
                f"does not, look at the data, the learning-rate schedule, regularization or the training length."
            )
            return
        shape = curve_trend(losses, self.floor, ratio, self.ratio)
        if undecided(ratio, len(losses), shape):
            more = shape.more * shape.unit
            log.v2(
                f"debug_overfit_batches verdict: NOT DECIDED yet: {facts}. The loss fell x{first / final:.3g} and "
                f"is still falling: {_falling_text(shape, f'{shape.unit} steps')}; at that rate about {more} more "
                f"steps would reach 'learns' (likely more: a loss slows down as it falls)"
                f"{_unknown_floor(self.floor, state, self.marked)}."
                f" Run again with ++debug_overfit_steps {_nice(len(losses) + 2 * more)} to decide."
            )
            return
        raise VerdictError(
            f"debug_overfit_batches verdict: the model does NOT learn: {facts}. A model that cannot memorize a few "
            f"batches has a bug in the model, the loss or the optimization."
            + still_falling(losses, self.floor, ratio, self.ratio)
            + _findings_hint(state)
            + f" Check that the loss is computed from the model's output (no .detach()), the learning rate "
            f"({state.learning_rate:g}), and the gradient health (debug_grad_health = 1)."
        )


class SyntheticDataVerdict(Plugin):
    """``debug_synthetic_data``: dev scores before and after training on the synthetic data."""

    needs = (LOSS_FLOORS,)
    provides = (VERDICT_RUN,)

    def __init__(self, config: Config):
        self.ratio = config.float("debug_synthetic_loss_ratio")
        self.before: dict[str, float] = {}

    @on(Event.STARTUP, Order.FIRST)
    def announce(self, state: RunState) -> None:
        state.store.put(VERDICT_RUN, "debug_synthetic_data", by=self)

    @classmethod
    def prepare(cls, config: Config) -> dict[str, Any]:
        if not config.bool("debug_synthetic_data"):
            return {}
        seed = config.int("random_seed")
        real = init_dataset(
            config.get("train"), option="train", random_seed=seed, train_ordering=config.get("batching")
        )
        declared = config.get("extern_data")
        extern_data = parse_extern_data(declared) if declared is not None else extern_data_from_dataset(real)
        generator = SyntheticLike(extern_data, reference_stats(real, extern_data), seed)
        num_seqs = min(real.num_seqs, MAX_SYNTHETIC_SEQS)
        log.v3(f"debug_synthetic_data: {num_seqs} synthetic training sequences: {generator.describe()}.")
        return _leave_real_run_alone(
            config,
            "debug_synthetic_data",
            train=generator.dataset(num_seqs, seed, "train"),
            dev=generator.dataset(max(num_seqs // 4, 16), seed + 1, "dev"),
        )

    @classmethod
    def from_config(cls, config: Config, state: RunState) -> SyntheticDataVerdict | None:
        return cls(config) if config.bool("debug_synthetic_data") else None

    @on(Event.STARTUP)
    def score_untrained(self, state: RunState) -> None:
        scores = ScoreAccumulator()
        loader = state.loaders["dev"]
        for indices, run_ctx in _eval_steps(state, loader.iterate(loader.plan(1))):
            scores.add(run_ctx, len(indices))
        self.before = scores.result()
        log.v3(f"debug_synthetic_data: untrained model on the synthetic dev set: {format_scores(self.before)}")

    @on(Event.FINISH)
    def judge(self, state: RunState) -> None:
        after = state.lr_control.scores.get(state.epoch, {}).get("dev", {})
        key = next(iter(self.before))
        first, final = self.before[key], after.get(key, float("nan"))
        floor = (state.store.get(LOSS_FLOORS) or {}).get(key, 0.0)
        changes = ", ".join(f"{name} {v:.4g} -> {after.get(name, float('nan')):.4g}" for name, v in self.before.items())
        facts = (
            f"on the synthetic dev set after {state.epoch} epoch(s): {changes}{_floor_text(floor)} ('learns' needs "
            f"{key} x{self.ratio:g} or less of the way left)"
        )
        left = remaining(first, final, floor)
        if left <= self.ratio:
            log.v3(
                f"debug_synthetic_data verdict: the model LEARNS the synthetic data {facts}. Model and training "
                f"work; if the real data does not train, look at the data: labels, preprocessing, normalization and "
                f"the train/dev split (see the sanity check's data warnings)."
            )
            return
        before = state.lr_control.scores.get(state.epoch - 1, {}).get("dev", {}).get(key, first)
        shape = trend(before, final, floor, left, self.ratio)
        falling = f"{key} {_falling_text(shape, 'epoch')}"
        if undecided(left, state.epoch, shape):
            log.v2(
                f"debug_synthetic_data verdict: NOT DECIDED yet {facts}: x{left:.3g} of the way left, still falling: "
                f"{falling}; at that rate about {shape.more} more epoch(s) would reach 'learns' (likely more: a "
                f"loss slows down as it falls). Run again with ++num_epochs "
                f"{state.epoch + 2 * shape.more} to decide."
            )
            return
        raise VerdictError(
            f"debug_synthetic_data verdict: the model does NOT learn even synthetic data with a plain relation "
            f"{facts}. Look at the model, the loss and the optimization, not at the data."
            + (f" Its dev loss was still falling, too slowly ({falling})." if shape.falling else "")
            + _findings_hint(state)
            + " debug_overfit_batches = 1 and debug_grad_health = 1 narrow it down."
        )


def _unknown_floor(floor: float, state: RunState, run_ctx_losses: dict[str, Any]) -> str:
    """Where no floor is known, the way is measured down to 0, which a loss with a floor never reaches (a
    cross-entropy over class ids, with its chance level known, does reach 0)."""
    chance = state.store.get(CHANCE_LEVELS) or {}
    if floor > 0 or all(name in chance for name, marked in run_ctx_losses.items() if not marked.as_error):
        return ""
    return (
        "; the way is measured down to 0, as no floor of this loss is known (one is for a binary cross-entropy "
        "marked on its own): a loss with soft targets or a sum of terms stops above 0"
    )


def _findings_hint(state: RunState) -> str:
    """The standing findings that can stop learning (warnings and errors, not notes), each in its own words (a finding
    says itself whether it decided a cause)."""
    causes = [f.message for f in standing(state.control.findings) if f.severity != "note"]
    return " What the checks found: " + " ".join(causes) if causes else ""


PLUGINS = (OverfitVerdict, SyntheticDataVerdict)
