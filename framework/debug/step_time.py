"""Where step time goes: data wait, forward, backward, optimizer; a warning for a data bottleneck, whose advice
fits this machine's cores and, when workers load the data, a comparison with batches built without them.

Always on (the engine's four clock marks and one callback per step). The per-step split goes into the step line at
``log_verbosity = 5``; the epoch summary gives the split in percent. On CUDA these are host
times: kernels run asynchronously, so the phase that waits for them absorbs their time (use
``torch_profile`` for device times).
"""

from __future__ import annotations

import statistics
import time
from typing import TYPE_CHECKING

from framework.base import log
from framework.base.config import Config
from framework.core.events import Callbacks, Event, Order
from framework.core.plugin import Plugin, on
from framework.core.state import RunState
from framework.training.threads import allowed_cpus

if TYPE_CHECKING:
    from framework.datasets.loader import BatchLoader

PHASES = ("data", "forward", "backward", "optimizer")
_BOTTLENECK_SHARE = 0.2
_BOTTLENECK_WAIT = 0.002  # typical seconds per step: below that, waiting for data costs nothing worth fixing
_MEASURE_BATCHES, _MEASURE_SEC = 5, 1.0  # batches built without workers to compare with the wait for them


class StepTimer(Plugin):
    """Accumulates phase times per epoch from the engine's clock marks (``RunState.step_clock``).

    The engine marks when the batch is there (before the step's first callback), when the step function is
    called (after the step-start callbacks) and returns, and when backward is done; this plugin's end mark is the
    last callback of the step. Waiting for data starts after diagnostics and ends when the next batch is there
    (the checks run before a step count in no phase). The optimizer phase ends at the end mark; at
    ``log_verbosity = 5`` it ends where the step's split is noted for the step line (``Order.REPORT``), which
    prints it.
    """

    order = Order.REPORT

    def __init__(self, per_step: bool):
        self.per_step = per_step
        self.totals = dict.fromkeys(PHASES, 0.0)
        self.data_waits: list[float] = []  # per step, and each step's total: the bottleneck is judged on _typical
        self.step_times: list[float] = []
        self.end = self.noted = 0.0  # perf_counter() of the previous step's end mark and of the step line's note

    @classmethod
    def from_config(cls, config: Config, state: RunState) -> StepTimer:
        return cls(per_step=log.enabled(5))

    def subscribe(self, callbacks: Callbacks) -> None:
        super().subscribe(callbacks)
        if self.per_step:  # the split is shown in the step line only
            # into the step line before StepProgress prints it (REPORT); not a relation: the end mark runs LAST
            callbacks.on(Event.STEP_END, self.note_step, Order.REPORT - 1)

    @on(Event.STEP_END, Order.LAST)
    def mark_end(self, state: RunState) -> None:
        """The end mark, and the step's phases into the epoch's totals (one callback: it runs every step)."""
        now = time.perf_counter()
        data, forward, backward, optimizer = self._split(state, self.noted if self.per_step else now)
        self.end = now
        totals = self.totals
        totals["data"] += data
        totals["forward"] += forward
        totals["backward"] += backward
        totals["optimizer"] += optimizer
        self.data_waits.append(data)
        self.step_times.append(data + forward + backward + optimizer)

    def note_step(self, state: RunState) -> None:
        """``log_verbosity = 5``: the step's split into the step line."""
        self.noted = time.perf_counter()
        step = zip(PHASES, self._split(state, self.noted), strict=True)
        state.control.note_step("time", " ".join(f"{p} {s * 1e3:.1f}ms" for p, s in step))

    def _split(self, state: RunState, optimizer_end: float) -> tuple[float, float, float, float]:
        """The step's seconds per phase (``PHASES``), from the engine's marks and the optimizer phase's end."""
        fetched, start, forward, backward = state.step_clock
        # checks run before the step (first-step probes) are not data wait: it ends when the batch is there
        return fetched - self.end, forward - start, backward - forward, optimizer_end - backward

    @on(Event.EPOCH_START)
    def on_epoch_start(self, state: RunState) -> None:
        self.totals = dict.fromkeys(PHASES, 0.0)
        self.data_waits, self.step_times = [], []
        self.end = time.perf_counter()

    @on(Event.EPOCH_END)
    def on_epoch_end(self, state: RunState) -> None:
        total = sum(self.totals.values())
        if total <= 0:
            return
        shares = {p: s / total for p, s in self.totals.items()}
        log.v3(
            f"Epoch {state.epoch} training steps took {total:.1f} sec in all: "
            + ", ".join(f"{p} {100 * share:.0f}%" for p, share in shares.items())
        )
        # Means without the slowest tenth of the steps, not sums: on a shared machine a few steps descheduled
        # while fetching a batch would otherwise make data look like a bottleneck. Not medians: workers in
        # lockstep make every other step wait (N batches arrive at once), a real bottleneck a median can miss.
        wait, step_time = _typical(self.data_waits), _typical(self.step_times)
        if wait > _BOTTLENECK_SHARE * step_time and wait > _BOTTLENECK_WAIT:
            log.v2(
                f"Data loading is a bottleneck: {100 * wait / step_time:.0f}% of epoch {state.epoch}'s typical step "
                f"time ({1e3 * wait:.1f} ms per step, typically) is spent waiting for batches. To fix it, "
                f"{_advice(state, wait)}."
            )


def _typical(values: list[float]) -> float:
    """The mean of an epoch's per-step ``values`` without the first step (workers starting, the first batches
    prefetched) and without the largest tenth of the rest, at least one (steps descheduled on a shared machine)."""
    rest = sorted(values[1:])
    kept = rest[: len(rest) - max(1, len(rest) // 10)] if len(rest) > 2 else rest
    return statistics.fmean(kept) if kept else 0.0


def _advice(state: RunState, wait: float) -> str:
    """What to change, judged on this machine's cores and, with workers, on a batch built without them.

    Workers overlap loading with training only on cores that training leaves free; on a small machine
    they compete with it, and a step can wait longer for them than it takes to build a batch in-process.
    """
    cores = allowed_cpus()[0]
    workers = (state.config.get("torch_dataloader_opts") or {}).get("num_workers", 0)
    faster = "make the dataset's get_batch faster (precompute features, memory-mapped files: NumpyDataset)"
    if not workers:
        if cores < 2:
            return f"{faster}; with 1 core, background workers would only take turns with training"
        return (
            f"load batches in background processes with torch_dataloader_opts = {{'num_workers': {min(4, cores - 1)}, "
            f"'pin_memory': True}} (pin_memory helps on CUDA; this machine has {cores} cores, and workers beyond "
            f"the cores training leaves free compete with it), or {faster}"
        )
    loader = state.loaders.get("train")
    built = _in_process_batch_time(loader, loader.plan(state.epoch)) if loader is not None else None
    if built is not None and built < wait:
        return (
            f"use fewer workers: without workers a batch takes {1e3 * built:.1f} ms to build in this process (measured "
            f"after the epoch), less than the {1e3 * wait:.1f} ms each step waited for num_workers={workers} on "
            f"{cores} cores, where the workers compete with training for the CPU; num_workers=0 is faster here"
        )
    if workers + 1 < cores:
        return f"use more workers than num_workers={workers} (at most {cores - 1} on {cores} cores), or {faster}"
    return (
        f"{faster}; num_workers={workers} already uses the {cores} cores, and more workers would compete with training"
    )


def _in_process_batch_time(loader: BatchLoader, plan: list) -> float | None:
    """Median seconds to build one of ``plan``'s batches in this process: a few batches, about a second at most."""
    times: list[float] = []
    deadline = time.perf_counter() + _MEASURE_SEC
    for indices in plan[:_MEASURE_BATCHES]:
        start = time.perf_counter()
        loader.tensor_batch(indices)
        times.append(time.perf_counter() - start)
        if time.perf_counter() > deadline:
            break
    return statistics.median(times) if times else None


PLUGINS = (StepTimer,)
