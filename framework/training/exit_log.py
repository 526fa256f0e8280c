"""Why a run ended, written to every log file: fatal exceptions and the signals that end a run.

A batch job's log must say why the job died. ``rnn.py`` writes the framework's own errors there
as their one paragraph; anything else (an exception in user code with the framework's notes,
KeyboardInterrupt, SystemExit) is written with its traceback and then propagates unchanged, so
``ipython --pdb`` still stops in the failing frame. Training turns SIGTERM into a checkpoint and
a clean stop; outside training, SIGTERM and SIGHUP end the run through ``Terminated``, so the
log says where the run was. Only SIGKILL (and the OOM killer's) cannot be logged by anyone.
"""

from __future__ import annotations

import os
import signal
import traceback
from typing import Any

from framework import log

_installed_by: int | None = None


class Terminated(BaseException):
    """A terminating signal arrived outside training; ``rnn.py`` exits with 128 + its number."""

    def __init__(self, signum: int, where: str):
        self.signum, self.where = signum, where
        super().__init__(f"terminated by {signal.Signals(signum).name} in {where}")


def install_termination_handlers() -> None:
    """SIGTERM and SIGHUP raise ``Terminated`` in this process (a SIGHUP that nohup ignores stays ignored)."""
    global _installed_by
    _installed_by = os.getpid()
    for signum in (signal.SIGTERM, signal.SIGHUP):
        if signal.getsignal(signum) in (signal.SIG_DFL, None):
            signal.signal(signum, _terminate)


def _terminate(signum: int, frame: Any) -> None:
    if os.getpid() != _installed_by:  # a forked child (DataLoader worker): die as it would have
        signal.signal(signum, signal.SIG_DFL)
        os.kill(os.getpid(), signum)
        return
    where = f"{frame.f_code.co_name} ({frame.f_code.co_filename}:{frame.f_lineno})" if frame else "an unknown place"
    raise Terminated(signum, where)


def terminated_message(exc: Terminated) -> str:
    """``Terminated by SIGTERM in load_data (datasets/hdf.py:42), ...``: where the run was."""
    return (
        f"Terminated by {signal.Signals(exc.signum).name} in {exc.where}, outside a training loop. Checkpoints written "
        f"so far are complete; run the same command again to continue from the newest."
    )


def log_fatal(exc: BaseException) -> None:
    """Write ``exc`` with its traceback and notes to the log files (stdout/stderr get it from Python)."""
    text = "".join(traceback.format_exception(exc)).rstrip()
    log.to_files(f"FATAL: the run ended with {type(exc).__name__}:\n{text}")
