"""The learning-rate plan against the planned run (``debug_schedule_plan``, on by default).

At startup of a training with ``dynamic_learning_rate``, the function is evaluated at sampled steps of the run as
configured (``num_epochs`` times the first epoch's batches, with the arguments the run will pass it) and the rates
it would apply are compared with what the config asks for:

- a rate that is negative or not finite at some planned step is a warning with the step;
- a plan whose highest rate is the square of ``learning_rate`` (and far below it) is a warning: the function
  multiplies by ``learning_rate`` and so does the rate it was given (a rate returned where a factor is expected);
- a plan that never comes within 30x of ``learning_rate`` otherwise is a note (a schedule that uses
  ``learning_rate`` as a scale, such as Noam's, does this by design);
- a plan that falls below 1/1000 of its peak before half of the run and stays there is a warning: most of the run's
  updates are made about 1000x smaller than the schedule's own peak;
- a plan that climbs through the whole run, never falling, and ends below 1/10 of ``learning_rate`` is a warning:
  the run never gets past the schedule's warm-up (a per-batch schedule that moves once per epoch does this).

The function is a config's pure function of its arguments: it is called with what it prints, logs and warns
swallowed (the run's own calls show it) and the RNG states restored afterwards; a function that keeps state between
calls (a counter) would see these calls too.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from framework.base.config import Config
from framework.base.findings import Finding, report
from framework.base.options import register
from framework.base.rng import get_rng_state, set_rng_state
from framework.base.util import accepted_kwargs
from framework.check_library.probe import unseen
from framework.check_library.schedule_trace import TINY_RATE
from framework.core.events import Event, Order
from framework.core.plugin import Plugin, on
from framework.core.state import RunState
from framework.training.lr_control import DynamicLearningRate

CHECK = "schedule plan"
OFF = "debug_schedule_plan = False"
register(
    "debug_schedule_plan",
    "bool",
    True,
    "At startup: evaluate dynamic_learning_rate over the planned run and warn where its rates cannot be meant.",
    __name__,
)

SAMPLES = 400  # planned steps the function is evaluated at (every step of a shorter run)
NEVER_NEAR = 30.0  # a plan whose peak stays this many times below learning_rate never applies it
FALLEN = 1e-3  # a rate below this fraction of the plan's peak makes updates negligible against the schedule's own
SHORT_OF = 10.0  # a plan still rising at the run's end this far below learning_rate never finishes its warm-up


class SchedulePlan(Plugin):
    """Evaluates ``dynamic_learning_rate`` over the planned run once, at startup."""

    order = Order.CHECK

    def __init__(self, schedule: Any):
        self.schedule = schedule

    @classmethod
    def from_config(cls, config: Config, state: RunState) -> SchedulePlan | None:
        schedule = config.get("dynamic_learning_rate")
        if state.task != "train" or schedule is None or not config.bool("debug_schedule_plan"):
            return None
        return cls(schedule)

    @on(Event.STARTUP)
    def judge(self, state: RunState) -> None:
        num_epochs = state.config.int("num_epochs")
        per_epoch = len(state.loaders["train"].plan(1))
        total = per_epoch * num_epochs
        if total < 2:
            return
        steps = sorted({int(s) for s in np.linspace(0, total - 1, min(SAMPLES, total))})
        rates = self._rates(state, steps, per_epoch)
        if rates is None:
            return
        finding = _judge(steps, rates, total, state.lr_control.learning_rate(1), per_epoch)
        if finding is not None:
            report(finding)

    def _rates(self, state: RunState, steps: list[int], per_epoch: int) -> list[float] | None:
        """The rates the function returns at ``steps``; None when it raises or returns no number (the run says so at
        its step)."""
        accepted = accepted_kwargs(self.schedule)
        names = (
            DynamicLearningRate.ARGUMENTS
            if accepted is None
            else [a for a in DynamicLearningRate.ARGUMENTS if a in accepted]
        )
        rng = get_rng_state()
        rates = []
        try:
            with unseen():  # what the function prints or warns belongs to the run's own calls
                for step in steps:
                    epoch = step // per_epoch + 1
                    values = {
                        "global_train_step": step,
                        "epoch": epoch,
                        "epoch_continuous": step / per_epoch,
                        "learning_rate": state.lr_control.learning_rate(epoch),
                    }
                    rates.append(float(self.schedule(**{n: values[n] for n in names})))
        except Exception:  # noqa: BLE001 - the real step calls it again and raises the user's error where it happens
            return None
        finally:
            set_rng_state(rng)
        return rates


def _judge(steps: list[int], rates: list[float], total: int, learning_rate: float, per_epoch: int) -> Finding | None:
    plan = f"over the planned {total} steps (num_epochs times the first epoch's batches)"
    bad = next(((s, r) for s, r in zip(steps, rates, strict=True) if not math.isfinite(r) or r < 0), None)
    if bad is not None:
        return Finding(
            "warning",
            CHECK,
            f"dynamic_learning_rate returns {bad[1]!r} at global_train_step {bad[0]} {plan}: a learning rate must be "
            f"a finite number >= 0.",
            evidence={"step": bad[0], "rate": bad[1]},
            where={"option": "dynamic_learning_rate", "step": bad[0]},
            fix="Bound the schedule (e.g. max(rate, 0.0)) or fix the formula at that step.",
            option=OFF,
        )
    peak_index = int(np.argmax(rates))
    peak, peak_step = rates[peak_index], steps[peak_index]
    evidence = {"learning_rate": learning_rate, "peak": peak, "peak_step": peak_step, "planned_steps": total}
    rising = _still_rising(rates, learning_rate)
    if learning_rate > 0 and 0 < peak < learning_rate / NEVER_NEAR or rising:
        if abs(peak - learning_rate**2) <= 0.1 * learning_rate**2:
            return Finding(
                "warning",
                CHECK,
                f"dynamic_learning_rate never applies learning_rate {learning_rate:g}: {plan} its rates peak at "
                f"{peak:.3g} (global_train_step {peak_step}), which is learning_rate squared. The function multiplies "
                f"by learning_rate and so does the value it is given: it returns a rate where a factor is expected, "
                f"and the rate is multiplied by learning_rate again.",
                evidence={**evidence, "problem": TINY_RATE},
                where={"option": "dynamic_learning_rate"},
                fix="Multiply by learning_rate once: return learning_rate * factor(step) with a factor that starts "
                "at 1 (or return the factor's rate without multiplying by learning_rate).",
                option=OFF,
            )
        if rising:
            return _rising_finding(steps, rates, learning_rate, plan, per_epoch, evidence)
        return Finding(
            "note",
            CHECK,
            f"dynamic_learning_rate stays below learning_rate {learning_rate:g} / {NEVER_NEAR:g} {plan}: its "
            f"highest rate is {peak:.3g} at global_train_step {peak_step}. A schedule that uses learning_rate as a "
            f"scale (Noam's) does this by design.",
            evidence=evidence,
            where={"option": "dynamic_learning_rate"},
            option=OFF,
        )
    low = [r < FALLEN * peak for r in rates]
    fallen = next((i for i in range(len(rates)) if all(low[i:])), None)
    if peak > 0 and fallen is not None and steps[fallen] <= total / 2:
        rest = 1 - steps[fallen] / total
        return Finding(
            "warning",
            CHECK,
            f"dynamic_learning_rate falls below {FALLEN:g} of its own peak ({peak:.3g} at global_train_step "
            f"{peak_step}) by global_train_step {steps[fallen]} and stays there {plan}: the last {rest:.0%} of the "
            f"run updates with rates down to {rates[-1]:.3g}, about 1000x or more smaller than the schedule's peak. "
            f"Check the unit the schedule counts in: a schedule written in epochs but given global_train_step decays "
            f"this way.",
            evidence={**evidence, "fallen_step": steps[fallen], "final_rate": rates[-1], "problem": TINY_RATE},
            where={"option": "dynamic_learning_rate", "step": steps[fallen]},
            fix="Give the schedule the argument it is written for (epoch or epoch_continuous for a schedule in "
            "epochs, global_train_step for one in steps), or stretch it over num_epochs.",
            option=OFF,
        )
    return None


def _still_rising(rates: list[float], learning_rate: float) -> bool:
    """Whether the plan climbs through the whole run, never falling, and ends below learning_rate / SHORT_OF: a
    warm-up the run never finishes."""
    never_falls = all(b >= a * (1 - 1e-6) for a, b in zip(rates, rates[1:], strict=False))
    return learning_rate > 0 and never_falls and rates[-1] > rates[0] * 1.01 and rates[-1] < learning_rate / SHORT_OF


def _rising_finding(
    steps: list[int], rates: list[float], learning_rate: float, plan: str, per_epoch: int, evidence: dict
) -> Finding:
    epochs: dict[int, set[float]] = {}
    for step, rate in zip(steps, rates, strict=True):
        epochs.setdefault(step // per_epoch, set()).add(rate)
    by_epoch = per_epoch > 1 and len(epochs) > 1 and all(len(r) == 1 for r in epochs.values())
    how = (
        f" Its rate changes only where an epoch starts ({len(epochs)} values for {len(steps)} planned steps): a "
        f"schedule built for per-batch steps that moves once per epoch (a scheduler stepped per epoch, given epoch "
        f"where it counts steps) stays at the start of its warm-up this way."
        if by_epoch
        else " A warm-up longer than the run does this, or a schedule whose horizon counts other steps than the run's."
    )
    return Finding(
        "warning",
        CHECK,
        f"dynamic_learning_rate is still rising when the run ends: {plan} it climbs from {rates[0]:.3g} to "
        f"{rates[-1]:.3g} and never comes down, ending at 1/{learning_rate / rates[-1]:.0f} of learning_rate "
        f"{learning_rate:g}: the run never gets past the schedule's warm-up.{how}",
        evidence={**evidence, "first_rate": rates[0], "final_rate": rates[-1], "moves_per_epoch_only": by_epoch},
        where={"option": "dynamic_learning_rate"},
        fix="Give the schedule the steps it was built for (global_train_step for a per-batch schedule, or build it "
        "with the run's length), or shorten its warm-up.",
        option=OFF,
    )


PLUGINS = (SchedulePlan,)
