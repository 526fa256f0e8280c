"""Is training working? Warnings when the train loss does not fall, or dev diverges from train.

``debug_loss_window`` (steps): the mean train loss of each window of N steps is compared with
that of the first window; not being below it after a full window means the model is not
learning (a plateau after progress is no reason to warn). The sum stays on the device; one host
sync per window. ``debug_dev_divergence_epochs`` (epochs): a dev loss that rose that many epochs
in a row while the matching train loss fell is overfitting; ``early_stopping_patience`` acts on it.
"""

from __future__ import annotations

from itertools import pairwise
from typing import Any

import torch

from framework import log
from framework.events import Event

# The latest window must be at least this much (relatively) below the first to count as learning.
MIN_IMPROVEMENT = 0.01


class LossWindowWatch:
    """Compares the mean train loss of each window of steps with the first window's."""

    def __init__(self, window: int):
        self.window = window
        self.sum: torch.Tensor | None = None
        self.count = 0
        self.first: float | None = None
        self.warned = False

    def install(self, engine: Any) -> None:
        engine.callbacks.on(Event.STEP_END, self.on_step_end)

    def on_step_end(self, engine: Any) -> None:
        with torch.no_grad():
            loss = engine.run_ctx.total_loss().detach().float()
        self.sum = loss if self.sum is None else self.sum + loss
        self.count += 1
        if self.count < self.window:
            return
        mean = float(self.sum) / self.count
        self.sum, self.count = None, 0
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
