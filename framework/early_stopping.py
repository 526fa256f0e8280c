"""Early stopping: end training when the watched score stops improving.

After each epoch (and once at startup, so that a rerun of a stopped training does not train
on), the epoch scores kept by the learning-rate control are searched for the best value of the
watched score. When ``early_stopping_patience`` epochs have passed without an improvement of
more than ``early_stopping_min_delta``, training ends after the current epoch's checkpoint; the
log names the best epoch and its checkpoint. The scores are part of every checkpoint, so the
decision survives a resume.
"""

from __future__ import annotations

from typing import Any

from framework import checkpoint
from framework.config import Config
from framework.events import Event
from framework.lr_control import score_key


def install_early_stopping(config: Config, engine: Any) -> None:
    """Watch the epoch scores when ``early_stopping_patience`` is set."""
    patience = config.get("early_stopping_patience")
    if patience is None:
        return
    stopper = EarlyStopping(
        patience, config.get("early_stopping_error_measure"), config.float("early_stopping_min_delta")
    )
    engine.callbacks.on(Event.STARTUP, stopper.check)
    engine.callbacks.on(Event.EPOCH_END, stopper.check)


class EarlyStopping:
    """Decides from ``engine.lr_control.scores`` whether training should end."""

    def __init__(self, patience: int, measure: str | None, min_delta: float):
        self.patience = patience
        self.measure = measure
        self.min_delta = min_delta

    def check(self, engine: Any) -> None:
        scores = engine.lr_control.scores
        if not scores:
            return
        key = score_key(scores[max(scores)], self.measure, "early_stopping_error_measure")
        history = [(epoch, s[key]) for epoch, s in sorted(scores.items()) if key in s]
        best_epoch, best = history[0]
        for epoch, value in history[1:]:
            if value < best - self.min_delta:
                best_epoch, best = epoch, value
        last_epoch = history[-1][0]
        if last_epoch - best_epoch < self.patience:
            return
        prefix = engine.config.get("model")
        where = f"; its checkpoint is {checkpoint.checkpoint_path(prefix, best_epoch)}" if prefix else ""
        engine.end_training(
            f"early stopping: {key} has not improved by more than {self.min_delta:g} for {last_epoch - best_epoch} "
            f"epochs (patience {self.patience}); the best was {best:.4g} at epoch {best_epoch}{where}"
        )
