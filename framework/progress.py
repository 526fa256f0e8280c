"""RETURNN-style progress lines, one per training step (``log_verbosity = 5``)."""

from __future__ import annotations

import time
from typing import Any

import psutil

from framework import log
from framework.events import Callbacks, Event
from framework.scores import format_scores, step_values


class StepProgress:
    """``ep 1 train, step 3, ce 0.699, fer 0.508, 0.020 sec/step, elapsed 0:00:22, exp. remaining 0:00:33, complete 40.00%``."""

    def __init__(self) -> None:
        self.epoch_start = 0.0
        self.step_start = 0.0
        self.first_step_logged = False

    def install(self, callbacks: Callbacks) -> None:
        """Subscribe to the engine events."""
        callbacks.on(Event.EPOCH_START, self.on_epoch_start)
        callbacks.on(Event.STEP_START, self.on_step_start)
        callbacks.on(Event.STEP_END, self.on_step_end)

    def on_epoch_start(self, engine: Any) -> None:
        self.epoch_start = time.perf_counter()

    def on_step_start(self, engine: Any) -> None:
        self.step_start = time.perf_counter()
        if not self.first_step_logged:
            self.first_step_logged = True
            since_start = time.time() - psutil.Process().create_time()
            log.v5(f"First step starts {since_start:.2f} sec after the process started.")

    def on_step_end(self, engine: Any) -> None:
        now = time.perf_counter()
        done = engine.step_in_epoch + 1
        elapsed = now - self.epoch_start
        remaining = elapsed / done * (engine.steps_in_epoch - done)
        scores = format_scores(step_values(engine.run_ctx), sep=", ")
        extra = "".join(f", {key} {value}" for key, value in engine.step_info.items())
        engine.step_info.clear()
        log.v5(
            f"ep {engine.epoch} train, step {engine.step_in_epoch}, {scores}, {now - self.step_start:.3f} sec/step, "
            f"elapsed {log.format_duration(elapsed)}, exp. remaining {log.format_duration(remaining)}, "
            f"complete {100.0 * done / engine.steps_in_epoch:.2f}%{extra}"
        )
