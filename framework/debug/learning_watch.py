"""Is training working? Warnings when the train loss does not fall, or dev diverges from train.

``debug_loss_window`` (steps): the mean train loss of each window of N steps is compared with
that of the first window; not being below it after a full window means the model is not
learning (a plateau after progress is no reason to warn). It reads the engine's running epoch
sums: nothing per step but a counter, one host sync per window. ``debug_dev_divergence_epochs`` (epochs): a dev loss that rose that many epochs
in a row while the matching train loss fell is overfitting; ``early_stopping_patience`` acts on it.
"""

from __future__ import annotations

from itertools import pairwise
from typing import Any

from framework import log
from framework.config import Config
from framework.core.events import Event
from framework.core.measurements import CHANCE_LEVELS, UPDATE_RATIO
from framework.core.plugin import Plugin, on
from framework.core.state import RunState
from framework.options import register

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

# The latest window must be at least this much (relatively) below the first to count as learning.
MIN_IMPROVEMENT = 0.01
# A loss within this fraction of its chance level has learned nothing from the input (further above it, the
# model has not even learned the label frequencies: that is "not decreasing") ...
CHANCE_MARGIN = 0.03
# ... and is reported after this many windows in a row there.
CHANCE_WINDOWS = 2
# A dev loss must rise by more than this fraction over the epochs to count as overfitting (not noise).
MIN_DEV_RISE = 0.01
# Updates below this fraction of a weight's norm are negligible (healthy training: around 1e-3).
TINY_UPDATE = 1e-5


class LossWindowWatch(Plugin):
    """Compares the mean train loss of each window of steps with the first window's.

    The means come from the engine's running epoch sums (``state.epoch_scores``), so a step costs
    a counter; what an epoch added to a window is carried over at its end.
    """

    needs = (CHANCE_LEVELS, UPDATE_RATIO)

    def __init__(self, window: int):
        self.window = window
        self.count = 0
        self.base: dict[str, dict] | None = None  # the epoch sums at the start of the window (None: zero)
        self.carry: dict[str, list[float]] = {}  # loss name -> [sum, weight] of the window's earlier epochs
        self.first: float | None = None
        self.warned = False
        self.at_chance: dict[str, int] = {}  # loss name -> windows in a row at its chance level (-1: warned)

    @classmethod
    def from_config(cls, config: Config, state: RunState) -> LossWindowWatch | None:
        window = config.int("debug_loss_window")
        return cls(window) if window > 0 else None

    def state_dict(self) -> dict[str, Any]:
        """The window so far (steps, carried sums, the epoch sums it started from), the first window's mean and
        the warnings given: a resumed run compares and warns as the uninterrupted one would."""
        base = None
        if self.base is not None:  # only mid-epoch: the epoch's end resets it; plain numbers (one read per checkpoint)
            base = {part: {name: float(value) for name, value in values.items()} for part, values in self.base.items()}
        return {
            "count": self.count,
            "base": base,
            "carry": {name: list(sums) for name, sums in self.carry.items()},
            "first": self.first,
            "warned": self.warned,
            "at_chance": dict(self.at_chance),
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Continue from ``state_dict``."""
        self.count, self.base, self.first, self.warned = state["count"], state["base"], state["first"], state["warned"]
        self.carry = {name: list(sums) for name, sums in state["carry"].items()}
        self.at_chance = dict(state["at_chance"])

    @on(Event.EPOCH_END)
    def on_epoch_end(self, state: RunState) -> None:
        self._fold(state)
        self.base = None  # the next epoch's sums start from zero

    @on(Event.STEP_END)
    def on_step_end(self, state: RunState) -> None:
        self.count += 1
        if self.count < self.window:
            return
        self.count = 0
        self._fold(state)
        mean = self._window_mean(state)
        self._check_chance_levels(state)
        self.carry = {}
        if mean is None:
            return
        if self.first is None:
            self.first = mean
            return
        if mean < self.first * (1 - MIN_IMPROVEMENT):
            self.warned = False
            return
        if not self.warned:
            self.warned = True
            lr = state.optimizer.param_groups[0].get("lr")
            facts = (
                f"the train loss is not decreasing: mean {mean:.4g} over the last {self.window} steps (up to step "
                f"{state.global_step}) vs {self.first:.4g} over the first {self.window}."
            )
            update_ratio = state.store.get(UPDATE_RATIO)
            if update_ratio is not None and update_ratio < TINY_UPDATE:
                log.v2(
                    f"WARNING learning watch: {facts} The updates are negligible: no weight changes by more than "
                    f"{update_ratio:.1e} of its norm per update (|dW|/|W|; healthy training is around 1e-3), so "
                    f"the learning rate {lr:g} is far too small. Raise it (e.g. x100, or find it with a learning-rate "
                    f"range test)."
                )
                return
            log.v2(
                f"WARNING learning watch: {facts} Check the learning rate ({lr:g}), the sanity-check and "
                f"gradient-health warnings, and whether the model can overfit a batch (debug_overfit_batches = 1)."
            )

    def _check_chance_levels(self, state: RunState) -> None:
        """Warn when a loss stays at its chance level (e.g. labels that do not belong to their inputs)."""
        for name, level in (state.store.get(CHANCE_LEVELS) or {}).items():
            window_sum, weight = self.carry.get(name, (0.0, 0.0))
            if weight <= 0 or self.at_chance.get(name) == -1:
                continue
            mean = window_sum / weight
            at_chance = abs(mean - level.value) <= CHANCE_MARGIN * level.value
            self.at_chance[name] = self.at_chance.get(name, 0) + 1 if at_chance else 0
            if self.at_chance[name] < CHANCE_WINDOWS:
                continue
            self.at_chance[name] = -1
            log.v2(
                f"WARNING learning watch: the train loss {name!r} has stayed at its chance level for "
                f"{CHANCE_WINDOWS * self.window} steps (mean {mean:.4g} over the last {self.window} steps up to step "
                f"{state.global_step}; {level.what} is {level.value:.4g}): the model predicts the label frequencies "
                f"and has learned nothing from its input. Labels that do not belong to their inputs do exactly this "
                f"(inputs and labels shuffled separately, misaligned files or orderings, a label column from another "
                f"table); so does an input that never reaches the model (detached, zeroed, the wrong key)."
            )

    def _fold(self, state: RunState) -> None:
        """Add what the epoch sums gained since ``base`` to the window's carry (one host sync)."""
        sums = state.epoch_scores.state_dict()
        for name, total in sums["sums"].items():
            old_sum, old_weight = (self.base["sums"][name], self.base["weights"][name]) if self.base else (0.0, 0.0)
            carried = self.carry.setdefault(name, [0.0, 0.0])
            carried[0] += float(total - old_sum)
            carried[1] += float(sums["weights"][name] - old_weight)
        self.base = sums

    def _window_mean(self, state: RunState) -> float | None:
        """The optimized loss (sum of scale x loss) averaged over the window."""
        total = 0.0
        for name, marked in state.run_ctx.losses.items():
            if marked.as_error or name not in self.carry:
                continue
            window_sum, weight = self.carry[name]
            if weight <= 0:
                return None
            total += marked.scale * window_sum / weight
        return total


class DevDivergenceWatch(Plugin):
    """Warns when a dev loss rose ``epochs`` epochs in a row while the train loss fell.

    An error measure (``as_error``) that rose counts only when no optimized loss of that dataset fell.
    """

    def __init__(self, epochs: int):
        self.epochs = epochs
        self.warned: set[tuple[str, str]] = set()
        self.errors: set[str] = set()  # the names of the as_error losses that evaluation marked

    @on(Event.EVAL_STEP_END)
    def on_eval_step_end(self, state: RunState) -> None:
        self.errors.update(name for name, marked in state.run_ctx.losses.items() if marked.as_error)

    @classmethod
    def from_config(cls, config: Config, state: RunState) -> DevDivergenceWatch | None:
        epochs = config.int("debug_dev_divergence_epochs")
        return cls(epochs) if epochs > 0 else None

    def state_dict(self) -> dict[str, Any]:
        """The overfitting warnings given (each is given once per run) and the error measures seen."""
        return {"warned": sorted(list(key) for key in self.warned), "errors": sorted(self.errors)}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Continue from ``state_dict``."""
        self.warned = {tuple(key) for key in state["warned"]}
        self.errors = set(state["errors"])

    @on(Event.EPOCH_END)
    def on_epoch_end(self, state: RunState) -> None:
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
            for name in losses:
                if dataset == "train" or name not in recent[-1].get("train", {}) or (dataset, name) in self.warned:
                    continue
                dev = [s.get(dataset, {}).get(name) for s in recent]
                train = [s.get("train", {}).get(name) for s in recent]
                if None in dev or None in train or (name in self.errors and dev_loss_improves):
                    continue
                rose = all(b > a for a, b in pairwise(dev)) and dev[-1] - dev[0] > MIN_DEV_RISE * abs(dev[0])
                if rose and all(b < a for a, b in pairwise(train)):
                    self.warned.add((dataset, name))
                    self._warn(state, f"{dataset}_{name}", dev, f"train_{name}", train)

    def _warn(self, state: RunState, key: str, dev: list[float], train_key: str, train: list[float]) -> None:
        log.v2(
            f"WARNING learning watch: overfitting: {key} rose for {self.epochs} epochs "
            f"({dev[0]:.4g} -> {dev[-1]:.4g} since epoch {state.epoch - self.epochs}) while {train_key} "
            f"fell ({train[0]:.4g} -> {train[-1]:.4g}). Regularize (dropout, weight decay, more data) or "
            f"stop early (early_stopping_patience)."
        )


PLUGINS = (LossWindowWatch, DevDivergenceWatch)
