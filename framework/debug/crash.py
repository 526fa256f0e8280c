"""Evidence from crashes and hangs: Python stacks of every thread, native backtraces, stall dumps.

- ``faulthandler`` is on for this process and, through ``PYTHONFAULTHANDLER``, for Python child
  processes (forked DataLoader workers inherit the handlers anyway): a segfault prints every
  thread's Python stack.
- A native handler (``native/backtrace.c``) prints the C-level backtrace first. It is compiled once
  with the system's C compiler and cached; without a compiler there is a log line saying so and
  crashes print the Python stacks only.
- ``SIGUSR1`` prints every thread's Python stack; training continues.
- ``watch_stall = seconds``: when no step finishes within that time, every thread's stack is
  printed, and again each further interval while the stall lasts; the run is not killed. It uses
  faulthandler's C-level watchdog, which fires even while the main thread is stuck inside native
  code holding the GIL. The log files get the same stacks from a Python thread (a batch job's log
  must show the stall; that thread needs the GIL, so stderr is the place to look when it is held).
"""

from __future__ import annotations

import ctypes
import faulthandler
import hashlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
from typing import Any

from framework.base import log
from framework.base.config import Config
from framework.base.options import register
from framework.core.events import Event
from framework.core.plugin import TASKS, Plugin, on
from framework.core.state import RunState
from framework.training.exit_log import thread_stacks

register(
    "watch_stall",
    "float | None",
    None,
    "Print every thread's stack when no step finishes within this many seconds (and again while it lasts).",
    __name__,
    range="(0, inf)",
)

_SOURCE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "native", "backtrace.c")
_native_lib: ctypes.CDLL | None = None


def install_crash_handlers() -> str:
    """Enable faulthandler, the native backtrace handler and SIGUSR1 stack dumps; say what is active."""
    global _native_lib
    faulthandler.enable(file=sys.stderr, all_threads=True)
    os.environ["PYTHONFAULTHANDLER"] = "1"
    if hasattr(signal, "SIGUSR1"):
        faulthandler.register(signal.SIGUSR1, file=sys.stderr, all_threads=True, chain=False)
    if _native_lib is not None:
        return "native backtraces on"
    library, problem = _build_native_library()
    if library is None:
        return f"native backtraces off ({problem}); crashes print the Python stacks only"
    lib = ctypes.CDLL(library)
    if lib.framework_install_native_backtrace() != 0:
        return "native backtraces off (sigaction failed); crashes print the Python stacks only"
    _native_lib = lib  # keep the library loaded: its handler code must stay mapped
    return "native backtraces on"


def _build_native_library() -> tuple[str | None, str]:
    """Compile native/backtrace.c into a cached shared library; (path, "") or (None, why not)."""
    if not sys.platform.startswith("linux"):
        return None, f"not supported on {sys.platform}"
    compiler = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")
    if compiler is None:
        return None, "no C compiler found; install gcc or set CC"
    with open(_SOURCE, "rb") as f:
        digest = hashlib.sha256(f.read()).hexdigest()[:16]
    cache = os.path.join(os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "framework")
    target = os.path.join(cache, f"native_backtrace_{digest}.so")
    if os.path.exists(target):
        return target, ""
    try:
        os.makedirs(cache, exist_ok=True)
        fd, tmp = tempfile.mkstemp(suffix=".so", dir=cache)
        os.close(fd)
        result = subprocess.run(
            [compiler, "-shared", "-fPIC", "-O1", "-o", tmp, _SOURCE], capture_output=True, text=True, timeout=60
        )
        if result.returncode != 0:
            os.remove(tmp)
            return None, f"compiling {_SOURCE} failed: {result.stderr.strip()[:200]}"
        os.replace(tmp, target)  # atomic: concurrent runs never load a half-written library
    except (OSError, subprocess.SubprocessError) as exc:
        return None, f"building the handler failed: {exc}"
    return target, ""


_stack_dumps: Any = sys.stderr  # where SIGUSR1 and watch_stall dumps go


def label_stack_dumps(label: str) -> None:
    """Prefix each line of the SIGUSR1 and watch_stall dumps with ``label`` (e.g. ``[rank 1]``).

    faulthandler writes from C, so its dumps go into a pipe that a thread copies to stderr with
    the label. Crash dumps keep going straight to stderr: the process may not live to relay them.
    """
    global _stack_dumps
    read_fd, write_fd = os.pipe()
    _stack_dumps = os.fdopen(write_fd, "w", buffering=1)

    def relay() -> None:
        with os.fdopen(read_fd, errors="replace") as dumps:
            for line in dumps:
                sys.stderr.write(f"{label} {line}")
                sys.stderr.flush()

    threading.Thread(target=relay, name="stack-dump-relay", daemon=True).start()
    if hasattr(signal, "SIGUSR1"):
        faulthandler.register(signal.SIGUSR1, file=_stack_dumps, all_threads=True, chain=False)


class StallWatch(Plugin):
    """``watch_stall``: re-arms faulthandler's watchdog whenever a step (training, evaluation, forward) finishes,
    and a thread that writes the same stacks to the log files."""

    tasks = TASKS

    def __init__(self, seconds: float):
        self.seconds = seconds
        self.progress = threading.Event()  # a step ended (or the run closed) within the current interval
        self.closed = False

    @classmethod
    def from_config(cls, config: Config, state: RunState) -> StallWatch | None:
        return cls(config.float("watch_stall")) if config.get("watch_stall") else None

    @on(Event.STARTUP)
    def start(self, state: RunState) -> None:
        self.arm(state)
        threading.Thread(target=self._log_stalls, name="stall-watch-log", daemon=True).start()

    @on(Event.STEP_END)
    @on(Event.EVAL_STEP_END)
    @on(Event.FORWARD_STEP_END)
    @on(Event.EPOCH_END)
    def arm(self, state: RunState) -> None:
        faulthandler.dump_traceback_later(self.seconds, repeat=True, file=_stack_dumps, exit=False)
        self.progress.set()

    @on(Event.CLOSE)
    def disarm(self, state: RunState) -> None:
        faulthandler.cancel_dump_traceback_later()
        self.closed = True
        self.progress.set()

    def _log_stalls(self) -> None:
        stalled = 0.0
        while not self.closed:
            if self.progress.wait(self.seconds):
                stalled = 0.0
            elif not self.closed:
                stalled += self.seconds
                log.to_files(
                    f"watch_stall: no step ended for {stalled:g} s (watch_stall = {self.seconds:g}). Where every "
                    f"thread is:\n{thread_stacks()}"
                )
            self.progress.clear()


def log_crash_handler_status(status: str) -> None:
    """Tell the user at startup what a crash will print."""
    log.v4(f"crash handlers: faulthandler on (SIGUSR1 prints all thread stacks), {status}")


PLUGINS = (StallWatch,)
