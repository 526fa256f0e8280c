"""Ctrl-C (SIGINT) and SIGTERM during training: finish the step, write a checkpoint, say how to resume.

The first signal asks the engine to stop; at the next update boundary (after an optimizer step,
so no accumulated gradient is lost) it writes ``<model>.interrupted.pt`` with everything needed
to continue mid-epoch, prints the command that resumes, and exits with status 130. Rerunning the
same command continues exactly where it stopped. A second Ctrl-C exits at once.
"""

from __future__ import annotations

import shlex
import signal
import sys
import threading
from typing import Any

from framework import log
from framework.errors import FrameworkError
from framework.events import Event


class TrainingInterrupted(FrameworkError):
    """Training stopped on request; the message says how to resume."""

    exit_code = 130


class GracefulStop:
    """Turns SIGINT/SIGTERM into ``engine.request_stop`` and acts on requests at update boundaries."""

    def __init__(self) -> None:
        self.previous: dict[int, Any] = {}

    def install(self, engine: Any) -> None:
        """Handle the signals while training (main thread only); check requests after every step."""
        engine.callbacks.on(Event.STEP_END, self.stop_if_requested)
        if threading.current_thread() is not threading.main_thread():
            return
        engine.callbacks.on(Event.STARTUP, self._handle_signals)
        engine.callbacks.on(Event.FINISH, self._restore_signals)
        engine.callbacks.on(Event.EXCEPTION, self._restore_signals)

    def _handle_signals(self, engine: Any) -> None:
        for signum in (signal.SIGINT, signal.SIGTERM):
            self.previous[signum] = signal.signal(signum, lambda s, f, e=engine: self._on_signal(e, s))

    def _restore_signals(self, engine: Any) -> None:
        for signum, handler in self.previous.items():
            signal.signal(signum, handler)
        self.previous = {}

    def _on_signal(self, engine: Any, signum: int) -> None:
        name = "Ctrl-C" if signum == signal.SIGINT else signal.Signals(signum).name
        signal.signal(signal.SIGINT, signal.default_int_handler)  # a second Ctrl-C interrupts at once
        engine.request_stop(name)
        log.v1(f"{name}: stopping after the current step and writing a checkpoint; press Ctrl-C again to exit at once.")

    def stop_if_requested(self, engine: Any) -> None:
        if engine.stop_requested is None or not engine.at_update_boundary():
            return
        path = engine.save_interrupted_checkpoint()
        where = f"Wrote {path}." if path else "No checkpoint written: set the 'model' option to be able to resume."
        command = " ".join(shlex.quote(a) for a in [sys.executable, *sys.argv])
        raise TrainingInterrupted(
            f"Training stopped on request ({engine.stop_requested}) after epoch {engine.epoch} step "
            f"{engine.step_in_epoch} (global step {engine.global_step}). {where}"
            + (f" Resume exactly from there by running the same command again:\n    {command}" if path else "")
        )
