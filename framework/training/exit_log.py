"""Why a run ended, written to every log file: fatal exceptions and the signals that end a run.

A batch job's log must say why the job died. ``rnn.py`` writes the framework's own errors there
as their one paragraph; anything else (an exception in user code with the framework's notes,
KeyboardInterrupt, SystemExit) is written with its traceback and then propagates unchanged, so
``ipython --pdb`` still stops in the failing frame. Training turns SIGTERM into a checkpoint and
a clean stop; outside training, SIGTERM and SIGHUP end the run through ``Terminated``, so the
log says where the run was. Only SIGKILL (and the OOM killer's) cannot be logged by anyone.

Two endings cannot wait for Python to unwind: a step that is stuck when the run is asked to stop
(``end_stuck_run``), and threads the config started and never stopped, which Python would wait
for forever at exit (``watch_leftover_threads``). Both write every thread's stack and the reason
to the log and end the process with ``os._exit`` after ``stop_grace_seconds``.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
import traceback
from collections.abc import Callable
from typing import Any

from framework.base import log, options
from framework.base.options import register

register(
    "stop_grace_seconds",
    "float",
    10.0,
    "How long an ending run waits for the current step after SIGINT/SIGTERM/SIGHUP, and for threads the config left "
    "running after the task; then it writes every thread's stack to the log and exits (SIGTERM: 143).",
    __name__,
    range="(0, inf)",
)


_installed_by: int | None = None
_exit_status: int | BaseException = 1  # what the run ends with, for the leftover-thread check at exit
_leftover_grace: float | None = None  # seconds; set when the check is registered
_ending_hooks: list[Callable[[BaseException | None, float], None]] = []


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


def thread_stacks(threads: list[threading.Thread] | None = None) -> str:
    """Each thread's name and Python stack, most recent call last (default: every thread but a calling watchdog)."""
    frames = sys._current_frames()
    by_ident = {thread.ident: thread for thread in threading.enumerate()}
    caller = threading.current_thread()
    if threads is None:
        idents = [i for i in frames if caller is threading.main_thread() or i != caller.ident]
        idents.sort(key=lambda i: i != threading.main_thread().ident)  # where the run is stuck comes first
    else:
        idents = [thread.ident for thread in threads]
    parts = []
    for ident in idents:
        if ident not in frames:
            continue
        thread = by_ident.get(ident)
        name = f"Thread {thread.name!r}" if thread is not None else f"Thread {ident}"
        daemon = " (daemon)" if thread is not None and thread.daemon else ""
        parts.append(f"{name}{daemon}, most recent call last:\n" + "".join(traceback.format_stack(frames[ident])))
    return "".join(parts).rstrip()


def end_stuck_run(status: int, reason: str) -> None:
    """Write ``reason`` and every thread's stack to the log and stderr, then end the process with ``status`` at once.

    For a run that cannot unwind (a step stuck in data loading or a collective): no cleanup runs,
    no checkpoint of the unfinished step is written; the lock file stays behind, and the kernel
    frees its lock.
    """
    message = f"{reason}\nWhere every thread was:\n{thread_stacks()}"
    log.v1(message)
    print(message, file=sys.stderr)
    _flush_and_exit(status)


def exiting_with(status: Any, cause: BaseException | None = None) -> Any:
    """Record what the run ends with (an exit status, or the exception propagating) for the leftover-thread check,
    once the ending is reported; runs the ``when_ending`` hooks with the exception that ended the run (or None) and
    the grace; returns ``status``."""
    global _exit_status
    _exit_status = status
    grace = _leftover_grace if _leftover_grace is not None else options.get("stop_grace_seconds").default
    for hook in _ending_hooks:
        hook(status if isinstance(status, BaseException) else cause, grace)
    return status


def when_ending(hook: Callable[[BaseException | None, float], None]) -> None:
    """Call ``hook(cause, grace)`` when the run's ending has been reported: ``cause`` is the exception that ended it
    (None after a normal end), ``grace`` is ``stop_grace_seconds``, the most the hook may wait for."""
    _ending_hooks.append(hook)


def watch_leftover_threads(grace: float | None = None) -> None:
    """Before Python waits for non-daemon threads at exit: name them with their stacks in the log, give them
    ``grace`` seconds (default ``stop_grace_seconds``'s), then end the process with the run's status.

    Without this, a config that starts a thread and never stops it keeps the process alive forever
    after its last checkpoint, with nothing in the log.
    """
    global _leftover_grace
    if _leftover_grace is None:
        # Python runs these right before joining the non-daemon threads (atexit would run after).
        threading._register_atexit(_end_leftover_threads)  # type: ignore[attr-defined]
    _leftover_grace = grace if grace is not None else options.get("stop_grace_seconds").default


def _end_leftover_threads() -> None:
    left = [t for t in threading.enumerate() if not t.daemon and t is not threading.current_thread()]
    if not left:
        return
    names = ", ".join(repr(thread.name) for thread in left)
    log.v1(
        f"The run is over, but {len(left)} thread(s) it started still run: {names}. Python would wait for them "
        f"forever; waiting {_leftover_grace:g} s (stop_grace_seconds) for them to end. Where they are:\n"
        f"{thread_stacks(left)}"
    )
    deadline = time.monotonic() + _leftover_grace
    for thread in left:
        thread.join(timeout=max(0.0, deadline - time.monotonic()))
    still = [thread for thread in left if thread.is_alive()]
    if not still:
        log.v1("They ended; the run ends normally.")
        return
    status = _status_of(_exit_status)
    log.v1(
        f"Ending the process with exit status {status}, as the run would have, although thread(s) "
        f"{', '.join(repr(t.name) for t in still)} still run. Make such threads daemon threads "
        f"(threading.Thread(..., daemon=True)) or stop them when the run ends."
    )
    _flush_and_exit(status)


def _status_of(ending: int | BaseException) -> int:
    if isinstance(ending, SystemExit):
        return ending.code if isinstance(ending.code, int) else (0 if ending.code is None else 1)
    if isinstance(ending, KeyboardInterrupt):  # what a shell shows for a process that Ctrl-C ended
        return 128 + signal.SIGINT
    return ending if isinstance(ending, int) else 1


def _flush_and_exit(status: int) -> None:
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a closed or broken stream must not keep the process alive
            pass
    os._exit(status)
