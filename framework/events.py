"""Named engine events and the callbacks bound to them.

Diagnostics subscribe to events when their option is on; the engine loop only calls
``emit``, which does nothing for an event without subscribers. A callback gets the engine,
whose attributes (``model``, ``optimizer``, ``epoch``, ``global_step``, ``batch``,
``run_ctx``, ``config``) are the training state.
"""

from __future__ import annotations

import enum
from collections import defaultdict
from collections.abc import Callable
from typing import Any


class Event(enum.Enum):
    """Points in the run where callbacks can act."""

    STARTUP = "startup"  # model, optimizer and datasets are ready
    EPOCH_START = "epoch_start"
    STEP_START = "step_start"  # batch is on the device, before train_step
    AFTER_FORWARD = "after_forward"  # train_step returned; losses are marked
    AFTER_BACKWARD = "after_backward"
    BEFORE_OPTIMIZER_STEP = "before_optimizer_step"  # gradients complete; a callback may set engine.skip_update
    AFTER_OPTIMIZER_STEP = "after_optimizer_step"
    STEP_END = "step_end"
    EPOCH_END = "epoch_end"  # after evaluation, before the checkpoint is written
    CHECKPOINT_SAVED = "checkpoint_saved"
    FINISH = "finish"
    EXCEPTION = "exception"  # an exception escapes a step; engine.exception holds it, it is re-raised after


Callback = Callable[[Any], None]


class StopTraining(Exception):
    """Raised by a callback to end training at once, cleanly: FINISH runs, no checkpoint of the partial epoch."""


class Callbacks:
    """Callbacks per event, called in the order they were added."""

    def __init__(self) -> None:
        self._handlers: dict[Event, list[Callback]] = defaultdict(list)

    def on(self, event: Event, callback: Callback) -> None:
        """Call ``callback(engine)`` whenever ``event`` happens."""
        self._handlers[event].append(callback)

    def off(self, event: Event, callback: Callback) -> None:
        """Stop calling ``callback`` for ``event`` (e.g. a check that only looks at the first step)."""
        self._handlers[event].remove(callback)

    def emit(self, event: Event, engine: Any) -> None:
        """Run the callbacks of ``event``."""
        for callback in list(self._handlers.get(event, ())):
            callback(engine)
