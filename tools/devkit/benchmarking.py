"""Alternating timing for the benchmarks in tools/: machine noise hits every variant alike."""

import statistics
import time
from collections.abc import Callable

from framework.assembly import plugin_classes

# What a benchmark's rounds are timed with: wall-clock time, or the CPU time of the benchmarking thread. With one
# torch thread every step runs in that thread, so CPU time is the work done, and other processes on a loaded
# machine barely change it (they only take turns with it); wall-clock time is what a user waits for.
CLOCKS = {"wall": time.perf_counter, "cpu": time.thread_time}
# A training run that only steps: it writes nothing, evaluates nothing, keeps its learning rate and never ends.
STEPS_ONLY = {
    "model": None,
    "log": None,
    "dev": None,
    "device": "cpu",
    "learning_rate_control": "constant",
    "num_epochs": 10**6,
}


def alternate(
    variants: dict[str, Callable[[int], int]],
    rounds: int,
    warmup: int = 2,
    clock: str = "wall",
    synchronize: Callable[[], None] | None = None,
) -> dict[str, tuple[float, float]]:
    """Per variant, (fastest, median) seconds per step over the rounds; ``variant(round) -> steps``.

    Noise on a shared machine only ever adds time, so the fastest round estimates the intrinsic
    cost best; the median shows how noisy the rounds were. ``clock`` is a key of ``CLOCKS``.
    ``synchronize`` (on an accelerator: ``torch.accelerator.synchronize``) runs at the end of each
    timed run, inside its time: the device's queued work counts to the variant that queued it.
    """
    now = CLOCKS[clock]
    times: dict[str, list[float]] = {name: [] for name in variants}
    for r in range(rounds + warmup):
        for name, run in variants.items():
            start = now()
            steps = run(r + 1)
            if synchronize is not None:
                synchronize()
            if r >= warmup:
                times[name].append((now() - start) / steps)
    return {name: (min(values), statistics.median(values)) for name, values in times.items()}


# The bug checks that are on by default, switched off (benchmark-step --all-off, benchmark-debug).
BUG_CHECKS_OFF = {
    option: False for cls in plugin_classes() for option in cls.bug_check
}  # every default bug check off, as each plugin declares (framework.core.plugin.Plugin.bug_check)
