"""Learning-rate control: a rate per epoch (constant, fixed list, newbob) and per-step schedules."""

from __future__ import annotations

from typing import Any

from framework import log
from framework.config import Config
from framework.errors import ConfigError
from framework.events import Callbacks, Event


class LearningRateControl:
    """Decides each epoch's learning rate from the configured schedule and the scores so far.

    ``newbob`` (RETURNN): after each epoch, if the watched score's relative change
    ``(new - old) / old`` is above ``newbob_relative_error_threshold`` (default -0.01: it did not
    improve by 1%), the rate is multiplied by ``newbob_learning_rate_decay``.
    """

    def __init__(self, config: Config):
        self.kind = config.get("learning_rate_control")
        self.initial = config.float("learning_rate")
        self.fixed = list(config.get("learning_rates") or [])
        self.error_measure = config.get("learning_rate_control_error_measure")
        self.decay = config.float("newbob_learning_rate_decay")
        self.threshold = config.float("newbob_relative_error_threshold")
        self.min_lr = config.float("min_learning_rate")
        self.epoch_lrs: dict[int, float] = {}
        self.scores: dict[int, dict[str, float]] = {}

    def learning_rate(self, epoch: int) -> float:
        """The rate for ``epoch``; decided once per epoch and remembered (also in checkpoints)."""
        if epoch not in self.epoch_lrs:
            self.epoch_lrs[epoch] = self._decide(epoch)
        return self.epoch_lrs[epoch]

    def _decide(self, epoch: int) -> float:
        if epoch <= len(self.fixed):
            return float(self.fixed[epoch - 1])
        if epoch == 1:
            return self.initial
        previous = self.learning_rate(epoch - 1)
        if self.kind != "newbob" or epoch - 2 not in self.scores or epoch - 1 not in self.scores:
            return previous
        key = self._measure_key(self.scores[epoch - 1])
        old, new = self.scores[epoch - 2].get(key), self.scores[epoch - 1][key]
        if old is None or old == 0:
            return previous
        relative = (new - old) / abs(old)
        if relative > self.threshold:
            lr = max(previous * self.decay, self.min_lr)
            log.v4(f"newbob: {key} changed {relative:+.2%} (threshold {self.threshold:+.2%}); learning rate {lr:g}")
            return lr
        return previous

    def _measure_key(self, scores: dict[str, float]) -> str:
        return score_key(scores, self.error_measure, "learning_rate_control_error_measure")

    def record(self, epoch: int, scores: dict[str, float]) -> None:
        """Remember an epoch's scores, keyed like ``dev_ce`` / ``train_ce``."""
        self.scores[epoch] = dict(scores)

    def state_dict(self) -> dict[str, Any]:
        """Everything needed to continue the schedule after a resume."""
        return {"epoch_lrs": dict(self.epoch_lrs), "scores": {e: dict(s) for e, s in self.scores.items()}}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore ``state_dict``."""
        self.epoch_lrs = {int(e): float(v) for e, v in state["epoch_lrs"].items()}
        self.scores = {int(e): dict(s) for e, s in state["scores"].items()}


def score_key(scores: dict[str, float], measure: str | None, option: str) -> str:
    """The score to watch: ``measure`` (named by ``option``) if set, else the first dev score, else the first."""
    if measure is not None:
        if measure not in scores:
            raise ConfigError(f"{option} {measure!r} is not among the scores of the epoch: {', '.join(scores)}.")
        return measure
    dev_keys = [k for k in scores if k.startswith("dev_")]
    return (dev_keys or list(scores))[0]


def install_dynamic_learning_rate(config: Config, callbacks: Callbacks) -> None:
    """Call ``dynamic_learning_rate`` before every step and apply the rate it returns."""
    schedule = config.get("dynamic_learning_rate")
    if schedule is None:
        return

    def apply(engine: Any) -> None:
        lr = schedule(global_train_step=engine.global_step, epoch=engine.epoch, learning_rate=engine.learning_rate)
        for group in engine.optimizer.param_groups:
            group["lr"] = lr

    callbacks.on(Event.STEP_START, apply)
