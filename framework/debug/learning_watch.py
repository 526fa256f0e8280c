"""Is training working? Warnings when the train loss does not fall, or dev diverges from train.

``debug_loss_window`` (steps): the mean train loss of each window of N steps is compared with
that of the first window; not being below it after a full window means the model is not
learning (a plateau after progress is no reason to warn). It reads the engine's running epoch
sums: nothing per step but a counter, one host sync per window. ``debug_dev_divergence_epochs`` (epochs): a dev loss that rose that many epochs
in a row while the matching train loss fell is overfitting; ``early_stopping_patience`` acts on it.
"""

from __future__ import annotations

from itertools import pairwise

from framework import log
from framework.config import Config
from framework.events import Event
from framework.options import register
from framework.plugin import Plugin, on
from framework.state import RunState

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


class LossWindowWatch(Plugin):
    """Compares the mean train loss of each window of steps with the first window's.

    The means come from the engine's running epoch sums (``state.epoch_scores``), so a step costs
    a counter; what an epoch added to a window is carried over at its end.
    """

    def __init__(self, window: int):
        self.window = window
        self.count = 0
        self.base: dict[str, dict] | None = None  # the epoch sums at the start of the window (None: zero)
        self.carry: dict[str, list[float]] = {}  # loss name -> [sum, weight] of the window's earlier epochs
        self.first: float | None = None
        self.warned = False

    @classmethod
    def from_config(cls, config: Config, state: RunState) -> LossWindowWatch | None:
        window = config.int("debug_loss_window")
        return cls(window) if window > 0 else None

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
            log.v2(
                f"WARNING learning watch: the train loss is not decreasing: mean {mean:.4g} over the last "
                f"{self.window} steps (up to step {state.global_step}) vs {self.first:.4g} over the first "
                f"{self.window}. Check the learning rate ({lr:g}), the sanity-check and gradient-health warnings, "
                f"and whether the model can overfit a batch (debug_overfit_batches = 1)."
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
    """Warns when a dev loss rose ``epochs`` epochs in a row while the train loss fell."""

    def __init__(self, epochs: int):
        self.epochs = epochs
        self.warned: set[tuple[str, str]] = set()

    @classmethod
    def from_config(cls, config: Config, state: RunState) -> DevDivergenceWatch | None:
        epochs = config.int("debug_dev_divergence_epochs")
        return cls(epochs) if epochs > 0 else None

    @on(Event.EPOCH_END)
    def on_epoch_end(self, state: RunState) -> None:
        scores = state.lr_control.scores
        recent = [scores[e] for e in range(state.epoch - self.epochs, state.epoch + 1) if e in scores]
        if len(recent) != self.epochs + 1:
            return
        for dataset, losses in recent[-1].items():
            for name in losses:
                if dataset == "train" or name not in recent[-1].get("train", {}) or (dataset, name) in self.warned:
                    continue
                dev = [s.get(dataset, {}).get(name) for s in recent]
                train = [s.get("train", {}).get(name) for s in recent]
                if None in dev or None in train:
                    continue
                if all(b > a for a, b in pairwise(dev)) and all(b < a for a, b in pairwise(train)):
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
