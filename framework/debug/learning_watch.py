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
from framework.events import Event

# The latest window must be at least this much (relatively) below the first to count as learning.
MIN_IMPROVEMENT = 0.01


class LossWindowWatch:
    """Compares the mean train loss of each window of steps with the first window's.

    The means come from the engine's running epoch sums (``engine.epoch_scores``), so a step costs
    a counter; what an epoch added to a window is carried over at its end.
    """

    def __init__(self, window: int):
        self.window = window
        self.count = 0
        self.base: dict[str, dict] | None = None  # the epoch sums at the start of the window (None: zero)
        self.carry: dict[str, list[float]] = {}  # loss name -> [sum, weight] of the window's earlier epochs
        self.first: float | None = None
        self.warned = False

    def install(self, engine: Any) -> None:
        engine.callbacks.on(Event.STEP_END, self.on_step_end)
        engine.callbacks.on(Event.EPOCH_END, self.on_epoch_end)

    def on_epoch_end(self, engine: Any) -> None:
        self._fold(engine)
        self.base = None  # the next epoch's sums start from zero

    def on_step_end(self, engine: Any) -> None:
        self.count += 1
        if self.count < self.window:
            return
        self.count = 0
        self._fold(engine)
        mean = self._window_mean(engine)
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
            lr = engine.optimizer.param_groups[0].get("lr")
            log.v2(
                f"WARNING learning watch: the train loss is not decreasing: mean {mean:.4g} over the last "
                f"{self.window} steps (up to step {engine.global_step}) vs {self.first:.4g} over the first "
                f"{self.window}. Check the learning rate ({lr:g}), the sanity-check and gradient-health warnings, "
                f"and whether the model can overfit a batch (debug_overfit_batches = 1)."
            )

    def _fold(self, engine: Any) -> None:
        """Add what the epoch sums gained since ``base`` to the window's carry (one host sync)."""
        state = engine.epoch_scores.state_dict()
        for name, total in state["sums"].items():
            old_sum, old_weight = (self.base["sums"][name], self.base["weights"][name]) if self.base else (0.0, 0.0)
            carried = self.carry.setdefault(name, [0.0, 0.0])
            carried[0] += float(total - old_sum)
            carried[1] += float(state["weights"][name] - old_weight)
        self.base = state

    def _window_mean(self, engine: Any) -> float | None:
        """The optimized loss (sum of scale x loss) averaged over the window."""
        total = 0.0
        for name, marked in engine.run_ctx.losses.items():
            if marked.as_error or name not in self.carry:
                continue
            window_sum, weight = self.carry[name]
            if weight <= 0:
                return None
            total += marked.scale * window_sum / weight
        return total


class DevDivergenceWatch:
    """Warns when a dev loss rose ``epochs`` epochs in a row while the train loss fell."""

    def __init__(self, epochs: int):
        self.epochs = epochs
        self.warned: set[str] = set()

    def install(self, engine: Any) -> None:
        engine.callbacks.on(Event.EPOCH_END, self.on_epoch_end)

    def on_epoch_end(self, engine: Any) -> None:
        scores = engine.lr_control.scores
        recent = [scores[e] for e in range(engine.epoch - self.epochs, engine.epoch + 1) if e in scores]
        if len(recent) != self.epochs + 1:
            return
        for key in recent[-1]:
            option, _, name = key.partition("_")
            train_key = f"train_{name}"
            if option == "train" or train_key not in recent[-1] or key in self.warned:
                continue
            dev = [s.get(key) for s in recent]
            train = [s.get(train_key) for s in recent]
            if None in dev or None in train:
                continue
            if all(b > a for a, b in pairwise(dev)) and all(b < a for a, b in pairwise(train)):
                self.warned.add(key)
                log.v2(
                    f"WARNING learning watch: overfitting: {key} rose for {self.epochs} epochs "
                    f"({dev[0]:.4g} -> {dev[-1]:.4g} since epoch {engine.epoch - self.epochs}) while {train_key} "
                    f"fell ({train[0]:.4g} -> {train[-1]:.4g}). Regularize (dropout, weight decay, more data) or "
                    f"stop early (early_stopping_patience)."
                )
