"""RETURNN-style progress lines, one per training step (``log_verbosity = 5``)."""

from __future__ import annotations

import os
import time
from typing import Any

import psutil

from framework.base import log
from framework.base.config import Config
from framework.core.events import Event, Order
from framework.core.plugin import Plugin, on
from framework.core.scores import format_scores, step_values
from framework.core.state import RunState


def seconds_since_process_start() -> float:
    """Time since this process started, to ~10 ms on Linux.

    ``psutil.Process().create_time()`` adds the boot time, which the kernel gives in whole seconds
    (up to ~1 s off); the start time in clock ticks since boot against ``CLOCK_BOOTTIME`` is exact.
    """
    try:
        with open("/proc/self/stat", encoding="ascii") as f:
            ticks = int(f.read().rsplit(")", 1)[1].split()[19])  # field 22: starttime, after the (comm) field
        return time.clock_gettime(time.CLOCK_BOOTTIME) - ticks / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError, AttributeError):
        return time.time() - psutil.Process().create_time()


class StepProgress(Plugin):
    """``ep 1 train, step 3, ce 0.699, fer 0.508, 0.020 sec/step, elapsed 0:00:22, exp. remaining 0:00:33, complete 40.00%``.

    It runs after every other step callback (``Order.REPORT``, last in the plugin list), so the line
    shows what diagnostics added with ``state.control.note_step``.
    """

    order = Order.REPORT

    def __init__(self, log_batch_size: bool = False) -> None:
        self.log_batch_size = log_batch_size
        self.epoch_start = 0.0
        self.step_start = 0.0
        self.first_step_logged = False

    @classmethod
    def from_config(cls, config: Config, state: RunState) -> StepProgress | None:
        return cls(config.bool("log_batch_size")) if log.enabled(5) else None

    @on(Event.EPOCH_START)
    def on_epoch_start(self, state: RunState) -> None:
        self.epoch_start = time.perf_counter()

    @on(Event.STEP_START, Order.LAST)
    def on_step_start(self, state: RunState) -> None:
        self.step_start = time.perf_counter()
        if not self.first_step_logged:
            self.first_step_logged = True
            since_start = seconds_since_process_start()
            log.v5(f"First step starts {since_start:.2f} sec after the process started.")

    @on(Event.STEP_END)
    def on_step_end(self, state: RunState) -> None:
        now = time.perf_counter()
        done = state.step_in_epoch + 1
        elapsed = now - self.epoch_start
        remaining = elapsed / done * (state.steps_in_epoch - done)
        scores = format_scores(step_values(state.run_ctx), sep=", ")
        notes = state.control.step_notes
        extra = "".join(f", {key} {value}" for key, value in notes.items())
        if self.log_batch_size:
            extra += "".join(
                f", {key} {value}" for key, value in batch_size_info(state.batch, state.batch_indices).items()
            )
        notes.clear()
        log.v5(
            f"ep {state.epoch} train, step {state.step_in_epoch}, {scores}, {now - self.step_start:.3f} sec/step, "
            f"elapsed {log.format_duration(elapsed)}, exp. remaining {log.format_duration(remaining)}, "
            f"complete {100.0 * done / state.steps_in_epoch:.2f}%{extra}"
        )


def batch_size_info(batch: dict[str, Any], indices: Any) -> dict[str, int]:
    """RETURNN's ``log_batch_size`` numbers: sequences, and per variable-length key its longest and summed length."""
    info = {"num_seqs": len(indices)}
    for key, lengths in batch.items():
        if key.endswith(":seq_len") and len(lengths):  # CPU tensors: no device sync
            name = key[: -len(":seq_len")]
            info[f"max_size:{name}"] = int(lengths.max())
            info[f"sum_size:{name}"] = int(lengths.sum())
    return info


PLUGINS = (StepProgress,)
