"""A score-driven schedule that reads its score the wrong way round (``debug_plateau_direction``, on by default).

torch's ``ReduceLROnPlateau`` cuts the learning rate when the value it is stepped with has not improved for
``patience`` steps, and "improved" means lower in ``mode='min'`` (its default) and higher in ``mode='max'``. Stepped
with an accuracy in mode 'min' (or with a loss in mode 'max'), every epoch that improves counts as one that did not:
the rate is cut again and again while the model still gets better.

Configured against applied, over the run: at epoch ends the schedulers of that kind that the run's code made are
found (a scan of live objects at epochs 2, 4, 8, ..., then the ones found are read at every epoch end), and each one's
``best`` (the best value it was given) is matched with the run's dev scores: a score of epoch e, or one minus it (an
accuracy computed from an error). When it matches a score that improved since (fell: every dev score here is a loss or
an error), and the scheduler's mode counts the values it was given, which moved the other way, as getting worse, the
scheduler is named with its mode, the score it was given and what it did.
"""

from __future__ import annotations

import gc
import weakref
from typing import Any

from framework.base.config import Config
from framework.base.findings import Finding, report
from framework.base.options import register
from framework.core.events import Event
from framework.core.plugin import Plugin, on
from framework.core.state import RunState

register(
    "debug_plateau_direction",
    "bool",
    True,
    "At epoch ends: a torch ReduceLROnPlateau whose mode counts the dev score it is given the wrong way round "
    "(an accuracy in mode 'min', a loss in mode 'max'), so that it cuts the learning rate while the model improves.",
    __name__,
)

IMPROVED = 0.05  # a dev score that fell by this fraction since the scheduler's best value has improved
SAME = 1e-6  # relative tolerance of a match between the scheduler's best value and a score


def _schedulers() -> list[Any]:
    """The live ReduceLROnPlateau objects."""
    from torch.optim.lr_scheduler import ReduceLROnPlateau

    # the type, not isinstance: isinstance asks lazy module proxies for __class__, which can warn
    return [obj for obj in gc.get_objects() if issubclass(type(obj), ReduceLROnPlateau)]


def _given(best: float, scores: dict[int, dict[str, dict[str, float]]]) -> tuple[str, str, str, int] | None:
    """(dataset, score, how the value was made from it, epoch) of the dev score whose value at an epoch, or one
    minus it, equals ``best``."""
    for epoch in sorted(scores):
        for dataset, values in scores[epoch].items():
            if dataset == "train":
                continue
            for name, value in values.items():
                for how, made in (
                    ("the score", value),
                    ("one minus the score (an accuracy, if the score is an error rate)", 1 - value),
                ):
                    if abs(made - best) <= SAME * max(1.0, abs(best)):
                        return dataset, name, how, epoch
    return None


class PlateauDirection(Plugin):
    """Finds ReduceLROnPlateau schedulers whose mode reads the dev score they are given the wrong way round."""

    # the default order (OBSERVE) comes after the config's own epoch-end callbacks, which step the schedulers
    bug_check = ("debug_plateau_direction",)

    def __init__(self) -> None:
        self.found: list[tuple[weakref.ref, int]] = []  # the schedulers found, and their step count then
        self.reported: set[int] = set()

    @classmethod
    def from_config(cls, config: Config, state: RunState) -> PlateauDirection | None:
        return cls() if config.bool("debug_plateau_direction") else None

    @on(Event.EPOCH_END)
    def check(self, state: RunState) -> None:
        if state.epoch >= 2 and state.epoch & (state.epoch - 1) == 0:  # epochs 2, 4, 8, ...: look for new ones
            known = {id(ref()) for ref, _ in self.found}
            self.found += [(weakref.ref(s), s.last_epoch) for s in _schedulers() if id(s) not in known]
        scores = state.lr_control.scores
        for ref, first_seen in self.found:
            scheduler = ref()
            # one this run steps (not a leftover of an earlier run in the process), not reported yet
            if scheduler is None or scheduler.last_epoch <= first_seen or id(scheduler) in self.reported:
                continue
            if scheduler.mode not in ("min", "max"):
                continue
            given = _given(float(scheduler.best), scores)
            if given is None:
                continue
            dataset, name, how, epoch = given
            key = f"{dataset}_{name}"
            history = [
                scores[e][dataset][name] for e in sorted(scores) if e >= epoch and name in scores[e].get(dataset, {})
            ]
            if len(history) < 3 or not history[0] - history[-1] >= IMPROVED * abs(history[0]) > 0:
                continue
            # the values it was given moved opposite to the score's improvement when made as "one minus"; as the score
            # itself they fell with it: wrong for mode 'max' (lower is worse there), and for 'min' when made as 1 - x
            wrong = (scheduler.mode == "min") == how.startswith("one minus")
            if not wrong:
                continue
            self.reported.add(id(scheduler))
            self._report(state, scheduler, key, how, epoch, history)

    @staticmethod
    def _report(state: RunState, scheduler: Any, key: str, how: str, epoch: int, history: list[float]) -> None:
        better = "lower" if scheduler.mode == "min" else "higher"
        rates = [float(group["lr"]) for group in scheduler.optimizer.param_groups]
        fix = "mode='max'" if scheduler.mode == "min" else "mode='min'"
        report(
            Finding(
                "warning",
                "learning watch",
                f"torch's ReduceLROnPlateau in mode {scheduler.mode!r} ({better} is better) is given {how} {key}: its "
                f"best value {float(scheduler.best):.4g} is that of epoch {epoch}, and {key} improved since "
                f"({history[0]:.4g} -> {history[-1]:.4g}), so the values it is given got {'higher' if better == 'lower' else 'lower'} and it counts "
                f"every improving epoch as a bad one (patience {scheduler.patience}, factor {scheduler.factor:g}; the rates "
                f"of its optimizer are now {rates}). It cuts the learning rate while the model still gets better.",
                evidence={
                    "mode": scheduler.mode,
                    "best": float(scheduler.best),
                    "score": key,
                    "given": how,
                    "history": history,
                    "num_bad_epochs": int(scheduler.num_bad_epochs),
                },
                where={"score": key, "scheduler": "ReduceLROnPlateau"},
                epoch=state.epoch,
                step=state.global_step,
                fix=f"Construct it with {fix} for this score, or step it with the loss or error itself.",
                option="debug_plateau_direction = False",
            )
        )


PLUGINS = (PlateauDirection,)
