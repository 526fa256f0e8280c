"""Learning-rate control: a rate per epoch (constant, fixed list, newbob) and per-step schedules.

The rate the optimizer applied (after ``dynamic_learning_rate`` or any callback that sets it) is
recorded at every update; the epoch line prints it (``lr 5e-05 -> 0.005`` under a warmup) instead
of the configured one.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from framework.base import log
from framework.base.config import Config
from framework.base.errors import ConfigError
from framework.base.util import accepted_kwargs
from framework.core.events import Event, Order
from framework.core.measurements import APPLIED_LEARNING_RATES
from framework.core.plugin import Plugin, on
from framework.core.scores import Scores
from framework.training.optim import set_learning_rate


class LearningRateControl:
    """Decides each epoch's learning rate from the configured schedule and the scores so far, by RETURNN's rules.

    ``newbob`` (RETURNN's ``NewbobRelative``): after each epoch, if the watched score's relative change
    ``(new - old) / |new|`` is above ``newbob_relative_error_threshold`` (default -0.01: it did not
    improve by 1%), the rate is multiplied by ``newbob_learning_rate_decay``, else by
    ``newbob_learning_rate_growth`` (1.0 by default: kept). ``newbob_multi_epoch`` (RETURNN's ``NewbobMultiEpoch``)
    decides on the mean relative change over the last ``newbob_multi_num_epochs`` epochs, every
    ``newbob_multi_update_interval`` epochs, and grows only below ``newbob_relative_error_grow_threshold``. A decay
    or growth may be a function of the rate, as in RETURNN; only a decayed rate is held at ``min_learning_rate``.
    The options ``learning_rate_control_relative_error_relative_lr``,
    ``learning_rate_control_min_num_epochs_per_new_lr`` and ``newbob_relative_error_div_by_old`` mean what they mean
    in RETURNN.
    """

    def __init__(self, config: Config):
        kind = config.get("learning_rate_control")
        self.kind = "newbob" if kind in ("newbob_rel", "newbob_relative") else kind
        self.multi_num_epochs = config.int("newbob_multi_num_epochs")
        interval = config.get("newbob_multi_update_interval")
        self.multi_update_interval = self.multi_num_epochs if interval is None else int(interval)
        self.relative_to_lr = config.bool("learning_rate_control_relative_error_relative_lr")
        self.min_epochs_per_lr = config.int("learning_rate_control_min_num_epochs_per_new_lr")
        self.div_by_old = config.bool("newbob_relative_error_div_by_old")
        self.initial = config.float("learning_rate")
        self.fixed = list(config.get("learning_rates") or [])
        self.error_measure = config.get("learning_rate_control_error_measure")
        self.decay = _update(config, "learning_rate_decay", "newbob_learning_rate_decay")
        self.growth = _update(config, "learning_rate_growth", "newbob_learning_rate_growth")
        self.threshold = config.float("newbob_relative_error_threshold")
        grow = config.get("newbob_relative_error_grow_threshold")
        self.grow_threshold = self.threshold if grow is None else float(grow)
        if self.kind == "newbob_multi_epoch" and self.grow_threshold > self.threshold:
            # RETURNN asserts "not (grow and decay)": it fails at the first mean change between the two
            raise ConfigError(
                f"newbob_relative_error_grow_threshold = {self.grow_threshold} is above "
                f"newbob_relative_error_threshold = {self.threshold}: a mean relative change between the two would "
                f"both decay and grow the learning rate, on which RETURNN's NewbobMultiEpoch fails (an "
                f"AssertionError). Set it at or below the threshold (unset, it equals it)."
            )
        self.min_lr = config.float("min_learning_rate")
        self.epoch_lrs: dict[int, float] = {}
        self.scores: dict[int, Scores] = {}  # epoch -> {dataset: {loss: value}}

    def learning_rate(self, epoch: int) -> float:
        """The rate for ``epoch``; decided once per epoch and remembered (also in checkpoints)."""
        if epoch not in self.epoch_lrs:
            self.epoch_lrs[epoch] = self._decide(epoch)
        return self.epoch_lrs[epoch]

    def continue_from(self, epoch_lrs: dict[int, float], scores: dict[int, Scores]) -> None:
        """Take the rates and scores of earlier epochs (``learning_rate_file``), as a resume would."""
        self.epoch_lrs.update(epoch_lrs)
        self.scores.update(scores)

    def restart_at(self, epoch: int) -> None:
        """Forget the rates decided for ``epoch`` and later: the schedule restarts at the configured rate there."""
        self.epoch_lrs = {e: lr for e, lr in self.epoch_lrs.items() if e < epoch}
        self.epoch_lrs[epoch] = float(self.fixed[epoch - 1]) if epoch <= len(self.fixed) else self.initial

    def _decide(self, epoch: int) -> float:
        if epoch <= len(self.fixed):
            return float(self.fixed[epoch - 1])
        if epoch == 1:
            return self.initial
        previous = self.learning_rate(epoch - 1)
        if self.kind not in ("newbob", "newbob_multi_epoch"):
            return previous
        if self.min_epochs_per_lr > 1:  # RETURNN: a new rate holds for at least that many epochs
            last = [self.epoch_lrs[e] for e in range(max(1, epoch - self.min_epochs_per_lr), epoch)]
            if len(set(last)) >= 2 or 0 < len(last) < self.min_epochs_per_lr:
                return last[-1]
        if self.kind == "newbob":
            relative = self._relative_change(epoch - 2, epoch - 1)
            grow_below = float("inf")  # RETURNN's NewbobRelative grows whenever it does not decay
        elif self.multi_update_interval > 1 and epoch % self.multi_update_interval != 1:
            return previous
        else:  # the mean over the last newbob_multi_num_epochs changes
            epochs = list(range(max(1, epoch - 1 - self.multi_num_epochs), epoch))
            changes = [self._relative_change(a, b) for a, b in zip(epochs, epochs[1:], strict=False)]
            relative = None if not changes or None in changes else float(np.mean(changes))
            grow_below = self.grow_threshold
        if relative is None:
            return previous
        if relative > self.threshold:
            lr = max(_apply(self.decay, previous), self.min_lr)
            log.v4(
                f"{self.kind}: relative change {relative:+.2%} (threshold {self.threshold:+.2%}); learning rate {lr:g}"
            )
            return lr
        if relative < grow_below:
            lr = _apply(self.growth, previous)  # not bounded, as in RETURNN
            if lr != previous:
                log.v4(f"{self.kind}: relative change {relative:+.2%}; learning rate grows to {lr:g}")
            return lr
        return previous

    def _relative_change(self, old_epoch: int, new_epoch: int) -> float | None:
        """RETURNN's relative error of the watched score from ``old_epoch`` to ``new_epoch``; None without both."""
        if old_epoch not in self.scores or new_epoch not in self.scores:
            return None
        dataset, loss = self._measure_key(self.scores[new_epoch])
        old, new = self.scores[old_epoch].get(dataset, {}).get(loss), self.scores[new_epoch][dataset][loss]
        denominator = abs(old) if self.div_by_old else abs(new)
        if old is None or denominator == 0:
            return None
        relative = (new - old) / denominator
        if self.relative_to_lr and self.epoch_lrs.get(new_epoch, 0) > 0 and self.initial > 0:
            relative /= self.epoch_lrs[new_epoch] / self.initial
        return relative

    def _measure_key(self, scores: Scores) -> tuple[str, str]:
        return score_key(scores, self.error_measure, "learning_rate_control_error_measure")

    def record(self, epoch: int, scores: Scores) -> None:
        """Remember an epoch's scores: ``{"train": {"ce": ...}, "dev": {"ce": ...}}``."""
        self.scores[epoch] = {dataset: dict(values) for dataset, values in scores.items()}

    def state_dict(self) -> dict[str, Any]:
        """Everything needed to continue the schedule after a resume."""
        return {"epoch_lrs": dict(self.epoch_lrs), "scores": {e: dict(s) for e, s in self.scores.items()}}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore ``state_dict`` (also of checkpoints that kept scores flat, as ``dev_ce``)."""
        self.epoch_lrs = {int(e): float(v) for e, v in state["epoch_lrs"].items()}
        self.scores = {int(e): nested_scores(s) for e, s in state["scores"].items()}


def _update(config: Config, name: str, newbob_name: str) -> float | Callable[[float], float]:
    """A decay or growth: RETURNN's name ``name`` wins over ``newbob_name``; a factor or a function of the rate."""
    value = config.get(name)
    value = config.get(newbob_name) if value is None else value
    return value if callable(value) else float(value)


def _apply(update: float | Callable[[float], float], learning_rate: float) -> float:
    """RETURNN's ``_calc_learning_rate_update``: the rate times a factor, or a function's rate."""
    if not callable(update):
        return learning_rate * update
    new = update(learning_rate)
    if not isinstance(new, (int, float)) or isinstance(new, bool):
        raise ConfigError(
            f"The learning-rate decay or growth function {update!r} returned {new!r} for the rate {learning_rate}; it "
            f"must return the new rate as a float (RETURNN asserts one)."
        )
    return float(new)


def nested_scores(scores: dict[str, Any]) -> Scores:
    """An epoch's scores as ``{dataset: {loss: value}}``, also from a checkpoint that kept them flat (``dev_ce``)."""
    nested: Scores = {}
    for key, value in scores.items():
        if isinstance(value, dict):
            nested[key] = dict(value)
        else:  # written before scores were keyed by dataset: "dev_ce"
            dataset, _, loss = key.partition("_")
            nested.setdefault(dataset, {})[loss] = value
    return nested


def score_key(scores: Scores, measure: str | None, option: str) -> tuple[str, str]:
    """The (dataset, loss) to watch: ``measure`` (named by ``option``, as ``<dataset>_<loss>``) if set,
    else the first loss of the first dev set, else the first score."""
    keys = [(dataset, loss) for dataset, values in scores.items() for loss in values]
    if measure is not None:
        for dataset, loss in keys:
            if measure in (f"{dataset}_{loss}", f"{dataset}_loss_{loss}"):  # ours, RETURNN's PyTorch engine's
                return dataset, loss
        known = ", ".join(f"{d}_{n}" for d, n in keys)
        raise ConfigError(f"{option} {measure!r} is not among the scores of the epoch: {known}.")
    dev_keys = [(d, n) for d, n in keys if d == "dev" or d.startswith("dev_")]
    return (dev_keys or keys)[0]


class DynamicLearningRate(Plugin):
    """``dynamic_learning_rate``: called before every step with the arguments RETURNN passes (``global_train_step``,
    ``epoch``, ``epoch_continuous``, ``learning_rate``); the rate it returns is applied.

    ``epoch_continuous`` is RETURNN's (returnn/torch/engine.py sets it before each step): ``epoch - 1`` at an epoch's
    first step, then ``epoch - 1`` plus the fraction of the epoch's sequences in the batches already trained. A
    function without ``**kwargs`` gets the arguments it names.
    """

    order = Order.TRAINING
    ARGUMENTS = ("global_train_step", "epoch", "epoch_continuous", "learning_rate")

    def __init__(self, schedule: Any):
        self.schedule = schedule
        accepted = accepted_kwargs(schedule)
        self.arguments = self.ARGUMENTS if accepted is None else tuple(a for a in self.ARGUMENTS if a in accepted)
        self.seqs_done: np.ndarray | None = None  # the epoch's sequences up to and including each step's batch

    @classmethod
    def from_config(cls, config: Config, state: Any) -> DynamicLearningRate | None:
        schedule = config.get("dynamic_learning_rate")
        return cls(schedule) if schedule is not None else None

    @on(Event.EPOCH_START)
    def count_sequences(self, state: Any) -> None:
        plan = state.loaders["train"].plan(state.epoch)
        same = len(plan) == state.steps_in_epoch  # a distributed rank's share of the plan: count by steps
        self.seqs_done = np.cumsum([len(batch) for batch in plan]) if same and plan else None

    def epoch_continuous(self, state: Any) -> float:
        """How much of the training is done, in epochs, before this step's batch (RETURNN's ``epoch_continuous``)."""
        before = state.step_in_epoch  # batches of this epoch already trained
        if before == 0:
            fraction = 0.0
        elif self.seqs_done is not None:
            fraction = self.seqs_done[before - 1] / self.seqs_done[-1]
        else:
            fraction = before / max(state.steps_in_epoch, 1)
        return state.epoch - 1 + float(fraction)

    @on(Event.STEP_START)
    def apply(self, state: Any) -> None:
        set_learning_rate(state.optimizer, self.rate(state, state.learning_rate))

    def rate(self, state: Any, learning_rate: float) -> float:
        """What the schedule returns for this step, given ``learning_rate`` as the rate it scales."""
        values = {"global_train_step": state.global_step, "epoch": state.epoch, "learning_rate": learning_rate}
        if "epoch_continuous" in self.arguments:
            values["epoch_continuous"] = self.epoch_continuous(state)
        return self.schedule(**{name: values[name] for name in self.arguments})


class OptimizerSchedules(Plugin):
    """Several optimizers: an optimizer's own ``dynamic_learning_rate`` (its entry in ``optimizers``) sets its rate
    before every step, after the run's schedules have set every optimizer's. It gets RETURNN's arguments, with
    ``learning_rate`` the rate the run's schedule gives this optimizer (the run's rate times its ratio)."""

    order = Order.TRAINING
    after = ("DynamicLearningRate",)

    def __init__(self, schedules: dict[str, DynamicLearningRate]):
        self.schedules = schedules

    @classmethod
    def from_config(cls, config: Config, state: Any) -> OptimizerSchedules | None:
        own = getattr(state.optimizer, "schedules", None)  # an OptimizerSet's, by optimizer name
        return cls({name: DynamicLearningRate(fn) for name, fn in own.items()}) if own else None

    @on(Event.EPOCH_START)
    def count_sequences(self, state: Any) -> None:
        for schedule in self.schedules.values():
            schedule.count_sequences(state)

    @on(Event.STEP_START)
    def apply(self, state: Any) -> None:
        optimizers = state.optimizer
        for name, schedule in self.schedules.items():
            ratio = optimizers.ratios[name]
            set_learning_rate(optimizers.optimizers[name], schedule.rate(state, state.learning_rate * ratio) / ratio)


class AppliedLearningRate(Plugin):
    """Records the rate the optimizer applies at each update (for the epoch line), after every callback set it: the
    base rate, before the parameter groups' ``lr_multiplier``."""

    order = Order.REPORT
    provides = (APPLIED_LEARNING_RATES,)

    def __init__(self) -> None:
        self.latest: tuple[int, list[Any]] | None = None  # (epoch, the groups' rates) last noted
        self.applied: dict[int, list[float]] = {}  # epoch -> [first, lowest, highest, latest] (not checkpointed)

    @on(Event.BEFORE_OPTIMIZER_STEP)
    def record(self, state: Any) -> None:
        rates = [group["lr"] / group.get("lr_multiplier", 1.0) for group in state.optimizer.param_groups]
        if self.latest != (state.epoch, rates):  # the same rates again change nothing noted (most updates)
            self.latest = (state.epoch, rates)
            self._note(state.epoch, [float(rate) for rate in rates])
            state.store.put(APPLIED_LEARNING_RATES, self.applied, by=self)

    def _note(self, epoch: int, rates: list[float]) -> None:
        """The rates of the optimizer's parameter groups at an update of ``epoch`` (the first group's leads)."""
        record = self.applied.get(epoch)
        if record is None:
            self.applied[epoch] = [rates[0], min(rates), max(rates), rates[0]]
        else:
            record[1], record[2], record[3] = min(record[1], *rates), max(record[2], *rates), rates[0]


PLUGINS = (DynamicLearningRate, OptimizerSchedules, AppliedLearningRate)
