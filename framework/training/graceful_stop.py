"""Ctrl-C (SIGINT), SIGTERM and SIGHUP during training: finish the step, write a checkpoint, say how to resume.

The first signal asks the engine to stop (``state.control.stop``); at the next update boundary
(after an optimizer step, so no accumulated gradient is lost; under torchrun, the first one that
every rank reaches knowing of the request) it writes
``<model>.interrupted.pt`` with everything needed to continue mid-epoch, prints the command that
resumes, and exits with status 130. Rerunning the same command continues exactly where it
stopped. A second Ctrl-C exits at once.

A scheduler's SIGTERM, or a script's ``kill -INT``, must end the run even when the step never ends (a hang in data
loading, a collective waiting for a dead rank): a second SIGTERM or SIGHUP, one of the three arriving while the step
has already run longer than ``stop_grace_seconds``, or a step that does not end within that time after
the first, ends the process at once (exit 128 + the signal's number: 143 for SIGTERM, 130 for SIGINT) with every
thread's stack and the reason in the log. No checkpoint of the unfinished step is written; a
checkpoint write under way is completed first.
"""

from __future__ import annotations

import signal
import threading
import time
from typing import Any

from framework.base import log
from framework.base.config import Config
from framework.core.events import Event
from framework.core.plugin import Plugin, on
from framework.core.state import RunState
from framework.training import checkpoint, distributed, exit_log


class GracefulStop(Plugin):
    """Turns SIGINT/SIGTERM/SIGHUP (a closed terminal) into ``state.control.stop`` while training (main thread only)."""

    def __init__(self, grace: float) -> None:
        self.grace = grace
        self.previous: dict[int, Any] = {}
        self.step_began = time.monotonic()  # when the current step (its data wait included) began
        self.stop_asked: str | None = None  # the signal that asked to stop, by name
        self.progress = threading.Event()  # a step ended since the stop was asked (or the run closed)
        self.closed = False

    @classmethod
    def from_config(cls, config: Config, state: RunState) -> GracefulStop | None:
        if threading.current_thread() is not threading.main_thread():
            return None
        return cls(config.float("stop_grace_seconds"))

    @on(Event.STARTUP)
    def handle_signals(self, state: RunState) -> None:
        for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            if signum == signal.SIGHUP and signal.getsignal(signum) == signal.SIG_IGN:
                continue  # started with nohup: a closed terminal is meant not to matter
            self.previous[signum] = signal.signal(signum, lambda s, f: self._on_signal(state, s))

    @on(Event.EPOCH_START)
    @on(Event.STEP_END)
    @on(Event.EVAL_STEP_END)
    def step_ended(self, state: RunState) -> None:
        self.step_began = time.monotonic()
        if self.stop_asked is not None:  # only the grace watch, started by a stop request, waits for it
            self.progress.set()

    @on(Event.CLOSE)
    def restore_signals(self, state: RunState) -> None:
        self.closed = True  # what follows (closing, leftover threads) has its own limits
        self.progress.set()
        for signum, handler in self.previous.items():
            signal.signal(signum, handler)
        self.previous = {}

    def _on_signal(self, state: RunState, signum: int) -> None:
        # SIGINT is Ctrl-C at a terminal, but also what a script sends (kill -INT): it ends a stuck step as the others do.
        name = "Ctrl-C" if signum == signal.SIGINT else signal.Signals(signum).name
        running = time.monotonic() - self.step_began
        if self.stop_asked is not None:
            self._end_stuck(state, signum, f"{name} arrived again, after {self.stop_asked}")
        if running > self.grace:
            self._end_stuck(state, signum, f"{name} arrived while the current step had run for {running:.0f} s")
        signal.signal(signal.SIGINT, signal.default_int_handler)  # a second Ctrl-C interrupts at once
        distributed.ask_to_stop(state, name)
        log.v1(f"{name}: stopping after the current step and writing a checkpoint; press Ctrl-C again to exit at once.")
        if self.stop_asked is None:
            self.stop_asked = name
            self.progress.clear()
            threading.Thread(target=self._watch, args=(state, signum), name="stop-grace-watch", daemon=True).start()

    def _watch(self, state: RunState, signum: int) -> None:
        """After a stop was asked, every step must end within the grace period (checkpoint writes may take longer)."""
        while not self.closed:
            if not self.progress.wait(self.grace) and not checkpoint.write_in_progress():
                why = f"no step ended within {self.grace:g} s (stop_grace_seconds) after {self.stop_asked}"
                self._end_stuck(state, signum, why)
            self.progress.clear()

    def _end_stuck(self, state: RunState, signum: int, why: str) -> None:
        prefix = state.config.get("model")
        newest = checkpoint.newest_checkpoint(prefix) if prefix else None
        resume = (
            f"The newest checkpoint is {newest}; running the same command again resumes from it."
            if newest
            else "There is no checkpoint to resume from."
        )
        exit_log.end_stuck_run(
            128 + signum,
            f"{signal.Signals(signum).name}: {why}. Ending the run now (exit {128 + signum}) without a checkpoint of "
            f"the unfinished step (epoch {state.epoch}, global step {state.global_step}). {resume}",
        )


PLUGINS = (GracefulStop,)
