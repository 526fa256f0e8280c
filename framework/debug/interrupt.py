"""Ctrl-C (SIGINT), SIGTERM and SIGHUP during training: finish the step, write a checkpoint, say how to resume.

The first signal asks the engine to stop (``state.control.stop``); at the next update boundary
(after an optimizer step, so no accumulated gradient is lost) it writes
``<model>.interrupted.pt`` with everything needed to continue mid-epoch, prints the command that
resumes, and exits with status 130. Rerunning the same command continues exactly where it
stopped. A second Ctrl-C exits at once.
"""

from __future__ import annotations

import signal
import threading
from typing import Any

from framework import log
from framework.config import Config
from framework.core.events import Event
from framework.core.plugin import Plugin, on
from framework.core.state import RunState


class GracefulStop(Plugin):
    """Turns SIGINT/SIGTERM/SIGHUP (a closed terminal) into ``state.control.stop`` while training (main thread only)."""

    def __init__(self) -> None:
        self.previous: dict[int, Any] = {}

    @classmethod
    def from_config(cls, config: Config, state: RunState) -> GracefulStop | None:
        return cls() if threading.current_thread() is threading.main_thread() else None

    @on(Event.STARTUP)
    def handle_signals(self, state: RunState) -> None:
        for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            if signum == signal.SIGHUP and signal.getsignal(signum) == signal.SIG_IGN:
                continue  # started with nohup: a closed terminal is meant not to matter
            self.previous[signum] = signal.signal(signum, lambda s, f: self._on_signal(state, s))

    @on(Event.CLOSE)
    def restore_signals(self, state: RunState) -> None:
        for signum, handler in self.previous.items():
            signal.signal(signum, handler)
        self.previous = {}

    def _on_signal(self, state: RunState, signum: int) -> None:
        name = "Ctrl-C" if signum == signal.SIGINT else signal.Signals(signum).name
        signal.signal(signal.SIGINT, signal.default_int_handler)  # a second Ctrl-C interrupts at once
        state.control.stop(name)
        log.v1(f"{name}: stopping after the current step and writing a checkpoint; press Ctrl-C again to exit at once.")


PLUGINS = (GracefulStop,)
