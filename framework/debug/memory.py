"""Memory: usage per step and epoch (``torch_log_memory_usage``), and leak detection (on by default).

Leak detection samples, every ``debug_leak_check_interval`` steps, the process RSS, the number
of memory blocks Python has allocated (``sys.getallocatedblocks``, which walks Python's memory
arenas: ~0.7 ms with torch loaded, hence the sparse sampling) and on an accelerator with memory
statistics the allocated device memory. When one of them grows at (nearly) every sample over a window, it warns
once with the growth rate. For Python objects it then counts the live tensors (a one-off garbage
collector scan) and names what piles up, e.g. "+40 tensors of shape [] with grad_fn
NllLossBackward0": losses stored with their autograd graph.
"""

from __future__ import annotations

import gc
import os
import resource
import sys
import warnings
from collections import Counter, deque
from typing import Any

import psutil
import torch

from framework.base import log
from framework.base.accelerator import is_accelerator, memory_allocated, memory_stats
from framework.base.config import Config
from framework.base.options import register
from framework.base.util import start_framework_process
from framework.core.events import Event, Order
from framework.core.plugin import Plugin, on
from framework.core.state import RunState

register(
    "torch_log_memory_usage",
    "bool",
    False,
    "Memory per step in the step line (device memory allocated where the accelerator keeps statistics, else process "
    "RSS) and current/peak per epoch.",
    __name__,
)

register(
    "watch_memory",
    "bool",
    False,
    "A separate watcher process reports RSS/PSS/USS of this process and its children when they change.",
    __name__,
)

register(
    "debug_leak_check",
    "bool",
    True,
    "Warn once when RSS, device memory or live Python objects grow steadily.",
    __name__,
)

register(
    "debug_leak_check_interval",
    "int",
    200,
    "Steps between two samples of the leak check (a sample costs ~0.7 ms).",
    __name__,
    range="[1, inf)",
)

_MB = 1024.0**2


def format_bytes(n: float) -> str:
    """``812.3MB`` / ``1.20GB``."""
    return f"{n / 1024**3:.2f}GB" if n >= 1024**3 else f"{n / _MB:.1f}MB"


_process: psutil.Process | None = None


def rss() -> int:
    """Resident set size of this process in bytes."""
    global _process
    if _process is None or _process.pid != os.getpid():  # cached: creating one costs ~25 us; new after fork
        _process = psutil.Process()
    return _process.memory_info().rss


class MemoryLog(Plugin):
    """``torch_log_memory_usage``: ``mem_usage:cuda 1.2GB`` / ``mem_usage:rss 812MB`` per step, summary per epoch.

    Device memory comes from ``torch.accelerator``'s statistics; an accelerator without them (its
    allocator is not torch's caching allocator) gets the process RSS, and the log says so once.
    """

    def __init__(self, device: torch.device):
        self.device = device if memory_stats(device) is not None else None
        if is_accelerator(device) and self.device is None:
            log.v3(
                f"torch_log_memory_usage: the {device.type} backend keeps no memory statistics "
                f"(torch.accelerator.memory_allocated); the process RSS is logged instead."
            )

    @classmethod
    def from_config(cls, config: Config, state: RunState) -> MemoryLog | None:
        return cls(state.device) if config.bool("torch_log_memory_usage") else None

    def subscribe(self, callbacks: Any) -> None:
        super().subscribe(callbacks)
        if log.enabled(5):  # the per-step field is only shown in the step line
            callbacks.on(Event.STEP_END, self.on_step_end, Order.REPORT)  # after the step timer's field

    def on_step_end(self, state: RunState) -> None:
        if self.device is not None:
            state.control.note_step(f"mem_usage:{self.device.type}", format_bytes(memory_allocated(self.device)))
        else:
            state.control.note_step("mem_usage:rss", format_bytes(rss()))

    @on(Event.EPOCH_END)
    def on_epoch_end(self, state: RunState) -> None:
        current = rss()
        # Linux reports KiB, and updates its high-water mark lazily (when pages are unmapped): it can lag the
        # current size, and a peak below the current value is no peak.
        peak_rss = max(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024, current)
        text = f"Epoch {state.epoch} memory: rss {format_bytes(current)} (peak {format_bytes(peak_rss)})"
        stats = memory_stats(self.device) if self.device is not None else None
        if stats is not None:
            text += (
                f", {self.device.type} allocated {format_bytes(stats['allocated'])} (peak "
                f"{format_bytes(stats['max_allocated'])}), reserved {format_bytes(stats['reserved'])} (peak "
                f"{format_bytes(stats['max_reserved'])})"
            )
        log.v3(text)


def _live_tensors() -> Counter:
    """Live tensors by (shape, dtype, autograd node): one full garbage collector scan (~0.1 s)."""
    counts: Counter = Counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # isinstance() on some deprecated torch objects warns
        objects = gc.get_objects()
    for obj in objects:
        if type(obj) is torch.Tensor or type(obj) is torch.nn.Parameter:
            node = type(obj.grad_fn).__name__ if obj.grad_fn is not None else None
            counts[(tuple(obj.shape), str(obj.dtype).removeprefix("torch."), node)] += 1
    return counts


class LeakDetector(Plugin):
    """Warns once per metric when memory grows steadily across samples.

    RSS and device memory count from the second epoch on (allocators and caches fill up during the
    first). Growth of Python objects alone is common early on (lazy caches), so it leads to a
    warning only when a scan confirms that live tensors pile up too.
    """

    WINDOW = 8  # samples; growth at all but one of them counts as steady
    WARMUP = 3  # samples before the baseline scan of live tensors

    def __init__(self, interval: int, device: torch.device | None = None):
        self.interval = interval
        self.device = device if device is not None and memory_stats(device) is not None else None
        # Only the last window is kept: a growing list of samples would itself look like a leak.
        self.samples: deque[tuple[int, int, dict[str, float]]] = deque(maxlen=self.WINDOW)
        self.taken = 0
        self.warned: set[str] = set()
        self.baseline_tensors: Counter | None = None
        self.baseline_step = 0
        self.next_scan = 0  # sample count before which no tensor scan happens (backs off after a clean one)
        self.scan_backoff = self.WINDOW

    @classmethod
    def from_config(cls, config: Config, state: RunState) -> LeakDetector | None:
        if not config.bool("debug_leak_check"):
            return None
        return cls(config.int("debug_leak_check_interval"), state.device)

    @on(Event.STEP_END)
    def on_step_end(self, state: RunState) -> None:
        if state.global_step % self.interval:
            return
        sample = {"rss": float(rss()), "python": float(sys.getallocatedblocks())}
        if self.device is not None:
            sample["device"] = float(memory_allocated(self.device))
        self.samples.append((state.epoch, state.global_step, sample))
        self.taken += 1
        if self.taken == self.WARMUP:
            self.baseline_tensors, self.baseline_step = _live_tensors(), state.global_step
        if self.taken >= self.WARMUP + self.WINDOW:
            self._check(list(self.samples))

    def _check(self, window: list[tuple[int, int, dict[str, float]]]) -> None:
        steps = window[-1][1] - window[0][1]
        # A leak of one tensor per step adds ~5 Python blocks per step; cyclic garbage waiting for
        # the next full collection and slowly growing bookkeeping stay below ~1.5 per step.
        for metric, threshold in (("rss", 16 * _MB), ("device", 16 * _MB), ("python", 2 * steps)):
            if metric in self.warned or metric not in window[0][2]:
                continue
            if metric != "python" and window[0][0] < 2:
                continue
            values = [s[metric] for _, _, s in window]
            rises = sum(b > a for a, b in zip(values, values[1:], strict=False))
            growth = values[-1] - values[0]
            if rises < len(values) - 2 or growth <= threshold:
                continue
            if metric == "python":
                if self.taken < self.next_scan:
                    continue
                message = self._python_message(growth, window)
                if message is None:
                    continue
            else:
                name = "process RSS" if metric == "rss" else f"{self.device.type} allocated memory"
                message = (
                    f"{name} grew steadily by {format_bytes(growth / steps)}/step ({format_bytes(values[0])} "
                    f"at step {window[0][1]} to {format_bytes(values[-1])} at step {window[-1][1]})."
                )
            self.warned.add(metric)
            log.v2(
                f"Possible memory leak: {message} Likely causes: keeping tensors that still hold their autograd "
                f"graph (e.g. losses.append(loss): store loss.item() or loss.detach() instead), lists or caches "
                f"in the config or model that grow every step, or tensors kept between steps."
            )

    def _python_message(self, growth: float, window: list) -> str | None:
        """Confirm with a scan of live tensors; None if they do not pile up (then look again later)."""
        now = _live_tensors()
        grown = now - self.baseline_tensors
        steps = window[-1][1] - self.baseline_step
        if sum(grown.values()) < max(steps / 4, 4):
            # Other Python objects grow (caches filling up, usually harmless): look again later, less often.
            self.baseline_tensors, self.baseline_step = now, window[-1][1]
            self.next_scan = self.taken + self.scan_backoff
            self.scan_backoff *= 2
            return None
        top = ", ".join(
            f"+{n} of shape [{', '.join(map(str, shape))}] {dtype}" + (f" with grad_fn {node}" if node else "")
            for (shape, dtype, node), n in grown.most_common(3)
        )
        with_graph = sum(n for (_, _, node), n in grown.items() if node)
        graph = f"; {with_graph} of them hold an autograd graph" if with_graph else ""
        return f"live tensors grew by {sum(grown.values())} in {steps} steps (to step {window[-1][1]}): {top}{graph}."


class MemoryWatcherProcess(Plugin):
    """``watch_memory``: starts ``memory_watcher`` as a separate process for the run."""

    def __init__(self, log_files: str | list[str] | None):
        self.log_files = [log_files] if isinstance(log_files, str) else list(log_files or [])
        self.process: Any = None

    @classmethod
    def from_config(cls, config: Config, state: RunState) -> MemoryWatcherProcess | None:
        return cls(config.get("log")) if config.bool("watch_memory") else None

    @on(Event.STARTUP)
    def start(self, state: RunState) -> None:
        import os

        self.process = start_framework_process(
            "framework.debug.memory_watcher", str(os.getpid()), "1.0", *self.log_files
        )
        log.v4(
            f"watch_memory: watcher process {self.process.pid} reports memory of process {os.getpid()} and its children"
        )

    @on(Event.CLOSE)
    def stop(self, state: RunState) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            self.process.wait(timeout=10)


PLUGINS = (MemoryLog, LeakDetector, MemoryWatcherProcess)
