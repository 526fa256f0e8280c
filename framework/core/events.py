"""Named engine events and the callbacks bound to them, in an explicit order.

The engine loop only calls ``emit``, which does nothing for an event without subscribers. A
callback gets the run's ``RunState`` (``framework.core.state``): model, optimizer, batch, step,
epoch, run context, and ``state.control``, the one channel through which a callback acts.

Order: each callback has an ``Order`` (a phase); within an event, lower orders run first, and
callbacks of the same order run in the order they were added. So clipping (TRAINING) changes
the gradients before gradient health (OBSERVE) looks at them, and the step line (REPORT) prints
what every diagnostic added to the step.
"""

from __future__ import annotations

import bisect
import enum
from collections.abc import Callable
from typing import Any


class Event(enum.Enum):
    """Points in the run where callbacks can act."""

    STARTUP = "startup"  # model, optimizer (training) and datasets are ready; in every task
    EPOCH_START = "epoch_start"
    STEP_START = "step_start"  # a training batch is on the device, before train_step
    AFTER_FORWARD = "after_forward"  # train_step returned; losses are marked
    AFTER_BACKWARD = "after_backward"
    BEFORE_OPTIMIZER_STEP = "before_optimizer_step"  # gradients complete; control.skip_update() skips it
    AFTER_OPTIMIZER_STEP = "after_optimizer_step"
    STEP_END = "step_end"
    EVAL_START = "eval_start"  # before the batches of one evaluation dataset (state.dataset names it)
    EVAL_STEP_START = "eval_step_start"  # an evaluation batch is on the device, before train_step
    EVAL_STEP_END = "eval_step_end"  # train_step returned on an evaluation batch (no backward, no update)
    EVAL_END = "eval_end"  # the dataset's scores are in state.eval_scores[state.dataset]
    EPOCH_END = "epoch_end"  # after evaluation, before the checkpoint is written
    CHECKPOINT_SAVED = "checkpoint_saved"
    FORWARD_STEP_START = "forward_step_start"  # task=forward: a batch is on the device, before forward_step
    FORWARD_STEP_END = "forward_step_end"  # forward_step returned; outputs are marked
    FINISH = "finish"  # the task completed (also after StopTraining)
    EXCEPTION = "exception"  # an exception escapes a step; state.exception holds it, it is re-raised after
    CLOSE = "close"  # always last, however the run ends (state.outcome says how): release what you hold


class Order(enum.IntEnum):
    """When a callback runs among those of the same event (lower first)."""

    FIRST = -100  # marks that must come before every other callback (step timing)
    USER = 0  # the config's own callbacks see the state before the framework's
    TRAINING = 100  # changes what is trained: clipping, schedules, parameter averaging, verdict data
    CHECK = 200  # decides about the step: numerics guard, sanity check (skip, stop)
    OBSERVE = 300  # reads the state: gradient health, learning watch, memory, fingerprints, TensorBoard
    REPORT = 400  # the step line and summaries, after everything else added to them
    LAST = 500  # marks that must come after every other callback (step timing)


Callback = Callable[[Any], None]


class StopTraining(Exception):
    """Raised by a callback to end training at once, cleanly: FINISH runs, no checkpoint of the partial epoch."""


class Callbacks:
    """Callbacks per event, sorted by ``Order``, then by when they were added."""

    def __init__(self) -> None:
        self._entries: dict[Event, list[tuple[int, int, Callback]]] = {}
        self._handlers: dict[Event, tuple[Callback, ...]] = {}  # what emit runs: rebuilt on change, not per emit
        self._added = 0

    def on(self, event: Event, callback: Callback, order: int = Order.OBSERVE) -> None:
        """Call ``callback(state)`` whenever ``event`` happens."""
        self._added += 1
        entries = self._entries.setdefault(event, [])
        bisect.insort(entries, (int(order), self._added, callback), key=lambda e: e[:2])
        self._handlers[event] = tuple(c for _, _, c in entries)

    def off(self, event: Event, callback: Callback) -> None:
        """Stop calling ``callback`` for ``event`` (e.g. a check that only looks at the first step)."""
        entries = self._entries.get(event, [])
        entries[:] = [e for e in entries if e[2] != callback]
        self._handlers[event] = tuple(c for _, _, c in entries)

    def emit(self, event: Event, state: Any) -> None:
        """Run the callbacks of ``event`` in order."""
        for callback in self._handlers.get(event, ()):
            callback(state)
