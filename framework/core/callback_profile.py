"""Time spent in each plugin callback, per event: what a check costs the training loop.

``Callbacks.profile()`` turns it on (``tools/benchmark-debug.py --profile-plugins``). While it is
off nothing is timed: ``Callbacks.emit`` calls the callbacks themselves, not timing wrappers.
"""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Callable
from typing import Any


class CallbackProfile:
    """Seconds and calls per (event, ``Plugin.method``), summed since the last ``reset``."""

    def __init__(self, clock: Callable[[], float] = time.perf_counter) -> None:
        self.clock = clock  # wall clock, or e.g. time.thread_time: CPU time, which other processes barely change
        self.seconds: defaultdict[tuple[str, str], float] = defaultdict(float)
        self.calls: defaultdict[tuple[str, str], int] = defaultdict(int)

    def timed(self, event: str, label: str, callback: Callable[[Any], None]) -> Callable[[Any], None]:
        """``callback``, timed under (``event``, ``label``); what it raises passes through unchanged."""
        key = (event, label)
        seconds, calls, clock = self.seconds, self.calls, self.clock

        def call(state: Any) -> None:
            start = clock()
            try:
                callback(state)
            finally:
                seconds[key] += clock() - start
                calls[key] += 1

        return call

    def reset(self) -> None:
        """Forget what was timed so far (e.g. warm-up steps)."""
        self.seconds.clear()
        self.calls.clear()

    def total(self) -> float:
        """Seconds in all callbacks."""
        return sum(self.seconds.values())

    def per_plugin(self) -> dict[str, float]:
        """Seconds per plugin (the owner part of the label), largest first."""
        plugins: defaultdict[str, float] = defaultdict(float)
        for (_, label), seconds in self.seconds.items():
            plugins[label.split(".", 1)[0]] += seconds
        return dict(sorted(plugins.items(), key=lambda item: -item[1]))

    def format(self, steps: int, min_us: float = 0.05) -> str:
        """The table: per plugin its microseconds per training step, then per event and callback, largest first;
        callbacks under ``min_us`` per step are summed into one line."""
        steps = max(steps, 1)
        lines = [f"{'callbacks, us per step':<58} {self.total() / steps * 1e6:8.1f}"]
        for plugin, seconds in self.per_plugin().items():
            lines.append(f"  {plugin:<56} {seconds / steps * 1e6:8.1f}")
            own = sorted(
                ((s, key) for key, s in self.seconds.items() if key[1].split(".", 1)[0] == plugin), reverse=True
            )
            small = 0.0
            for s, (event, label) in own:
                if s / steps * 1e6 < min_us:
                    small += s
                    continue
                per_call = s / self.calls[(event, label)] * 1e6
                lines.append(
                    f"    {event + ': ' + label.split('.', 1)[1]:<54} {s / steps * 1e6:8.1f}"
                    f"   ({self.calls[(event, label)] / steps:.2f} calls/step, {per_call:.1f} us/call)"
                )
            if small and len(own) > 1:
                lines.append(f"    {'(callbacks under ' + str(min_us) + ' us/step)':<54} {small / steps * 1e6:8.1f}")
        return "\n".join(lines)
