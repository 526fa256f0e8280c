"""Where step time goes: data wait, forward, backward, optimizer; a warning for a data bottleneck.

Always on (four clock reads per step). The per-step split goes into the step line at
``log_verbosity = 5``; the epoch summary gives the split in percent. On CUDA these are host
times: kernels run asynchronously, so the phase that waits for them absorbs their time (use
``torch_profile`` for device times).
"""

from __future__ import annotations

import time
from typing import Any

from framework import log
from framework.events import Event

PHASES = ("data", "forward", "backward", "optimizer")
_BOTTLENECK_SHARE = 0.2
_BOTTLENECK_WAIT = 0.002  # mean seconds per step: below that, waiting for data costs nothing worth fixing


class StepTimer:
    """Accumulates phase times per epoch from engine events."""

    def __init__(self, per_step: bool):
        self.per_step = per_step
        self.totals = dict.fromkeys(PHASES, 0.0)
        self.marks: dict[str, float] = {}

    def install(self, engine: Any) -> None:
        """Subscribe to the step events."""
        callbacks = engine.callbacks
        callbacks.on(Event.EPOCH_START, self.on_epoch_start)
        callbacks.on(Event.STEP_START, self._mark("start"))
        callbacks.on(Event.AFTER_FORWARD, self._mark("forward"))
        callbacks.on(Event.AFTER_BACKWARD, self._mark("backward"))
        callbacks.on(Event.STEP_END, self.on_step_end)
        callbacks.on(Event.EPOCH_END, self.on_epoch_end)
        # Waiting for data starts after every other STEP_END callback (diagnostics are not data loading):
        # subscribed at STARTUP, it runs after all callbacks that were installed before.
        callbacks.on(Event.STARTUP, lambda engine: callbacks.on(Event.STEP_END, self._mark("end")))

    def _mark(self, name: str):
        def mark(engine: Any) -> None:
            self.marks[name] = time.perf_counter()

        return mark

    def on_epoch_start(self, engine: Any) -> None:
        self.totals = dict.fromkeys(PHASES, 0.0)
        self.marks = {"end": time.perf_counter()}

    def on_step_end(self, engine: Any) -> None:
        now = time.perf_counter()
        m = self.marks
        step = {
            "data": m["start"] - m["end"],
            "forward": m["forward"] - m["start"],
            "backward": m["backward"] - m["forward"],
            "optimizer": now - m["backward"],
        }
        for phase, seconds in step.items():
            self.totals[phase] += seconds
        if self.per_step:
            engine.step_info["time"] = " ".join(f"{p} {s * 1e3:.1f}ms" for p, s in step.items())

    def on_epoch_end(self, engine: Any) -> None:
        total = sum(self.totals.values())
        if total <= 0:
            return
        shares = {p: s / total for p, s in self.totals.items()}
        log.v3(
            f"Epoch {engine.epoch} step time {total:.1f} sec: "
            + ", ".join(f"{p} {100 * share:.0f}%" for p, share in shares.items())
        )
        mean_wait = self.totals["data"] / max(engine.steps_in_epoch, 1)
        if shares["data"] > _BOTTLENECK_SHARE and mean_wait > _BOTTLENECK_WAIT:
            opts = engine.config.get("torch_dataloader_opts") or {}
            hint = (
                "load batches in background processes with torch_dataloader_opts = {'num_workers': 2, "
                "'pin_memory': True} (pin_memory helps on CUDA)"
                if not opts.get("num_workers")
                else f"use more workers than num_workers={opts['num_workers']}, or make the dataset's get_batch faster"
            )
            log.v2(
                f"Data loading is a bottleneck: {100 * shares['data']:.0f}% of epoch {engine.epoch}'s step time "
                f"({1e3 * mean_wait:.1f} ms per step) is spent waiting for batches. To fix it, {hint}."
            )
