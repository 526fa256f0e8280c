"""Verbosity-levelled logging to stdout and the files named by the ``log`` option.

RETURNN's verbosity levels map onto Python logging levels (v1 = CRITICAL ... v5 = DEBUG), so
``log_verbosity = 3`` shows epoch summaries, 4 adds setup information and 5 a line per step.
The logger is the standard ``logging.getLogger("framework")``: users can attach handlers.

Each message in a log file starts with the wall-clock time (``FILE_FORMAT``). Log files are opened without
following a link (``framework.base.safe_create``) and appended
to with one ``write`` per line. A log file that cannot be written (full disk, I/O error) is
reported once on stderr and the run goes on: stdout still shows everything, and when writing
works again the file gets a line saying how many lines are missing there and why.
"""

from __future__ import annotations

import logging
import os
import sys

from framework.base.errors import ConfigError
from framework.base.options import register
from framework.base.safe_create import open_kept

register(
    "findings_fail_level",
    "str | None",
    None,
    "'warning' or 'error': after doing its work, the run exits with status 3 if a check reported a finding of that "
    "severity or above (for CI). None: findings do not change the exit status.",
    "framework.core.run_findings",
    choices=(None, "warning", "error"),
)
register(
    "log",
    "str | list[str] | None",
    None,
    "Log file(s) that receive everything printed to stdout (appended); a failing write is reported once on stderr "
    "and the run goes on.",
    __name__,
)
register(
    "log_verbosity",
    "int",
    4,
    "3: epoch summaries, 4: plus setup info, 5: plus a line per step.",
    __name__,
    choices=(0, 1, 2, 3, 4, 5),
)
register(
    "log_batch_size",
    "bool",
    False,
    "With log_verbosity 5, each step line shows the batch's sequences and frames per key (RETURNN's option).",
    __name__,
)


logger = logging.getLogger("framework")

_HANDLER_TAG = "_framework_handler"
# Log files get the wall-clock time in front of each message (stdout stays as it was): "2026-11-27 00:12:03 ...".
FILE_FORMAT = logging.Formatter("%(asctime)s %(message)s", "%Y-%m-%d %H:%M:%S")
TIME_PREFIX = r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d "  # a regular expression of it (re.MULTILINE)


def _level(verbosity: int) -> int:
    return 60 - 10 * verbosity


def setup(verbosity: int = 4, files: str | list[str] | None = None, stdout: bool = True) -> None:
    """Route the framework's log to stdout (unless ``stdout=False``) and to each log file (appended)."""
    for handler in [h for h in logger.handlers if getattr(h, _HANDLER_TAG, False)]:
        logger.removeHandler(handler)
        handler.close()
    handlers: list[logging.Handler] = [logging.StreamHandler(sys.stdout)] if stdout else []
    if not stdout and not files:
        handlers.append(logging.NullHandler())  # else logging's last resort prints warnings to stderr
    for path in [files] if isinstance(files, str) else files or []:
        try:
            os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
            handlers.append(LogFile(path))
        except OSError as exc:
            raise ConfigError(
                f"The log file {path!r} cannot be written ({os.strerror(exc.errno) if exc.errno else exc}). "
                f"Nothing was started. Make its directory writable or choose another path with the 'log' option."
            ) from None
    for handler in handlers:
        setattr(handler, _HANDLER_TAG, True)
        handler.setFormatter(FILE_FORMAT if isinstance(handler, LogFile) else logging.Formatter("%(message)s"))
        logger.addHandler(handler)
    logger.setLevel(_level(max(verbosity, 1)) if verbosity > 0 else logging.CRITICAL + 10)
    logger.propagate = False


class LogFile(logging.Handler):
    """One log file, appended to; a failing write is reported once on stderr, and the gap in the file is marked."""

    def __init__(self, path: str):
        super().__init__()
        self.path = path
        self._fd: int | None = open_kept(path, "a log file", os.O_WRONLY | os.O_APPEND)
        self._missing = 0  # lines not written since writing last failed
        self._reason = ""
        self._reported = False
        self.held: list[bytes] | None = None  # lines kept back until the run may write here (hold_file_writes)

    def emit(self, record: logging.LogRecord) -> None:
        try:
            line = (self.format(record) + "\n").encode("utf-8", "backslashreplace")
        except Exception:  # a record whose message cannot be formatted: logging's own report
            self.handleError(record)
            return
        if self.held is not None:
            self.held.append(line)
        else:
            self._append(line)

    def write_held(self, write: bool) -> None:
        """Stop holding lines back; write the held ones (``write``) or drop them."""
        held, self.held = self.held, None
        for line in held if write and held else []:
            self._append(line)

    def _append(self, line: bytes) -> None:
        if self._fd is None:
            return
        try:
            if self._missing:
                gap = f"[framework] {self._missing} log lines are missing here: writing failed ({self._reason}).\n"
                self._write(gap.encode("utf-8"))
                self._missing = 0
            self._write(line)
        except OSError as exc:
            self._missing += 1
            self._reason = os.strerror(exc.errno) if exc.errno else str(exc)
            if not self._reported:
                self._reported = True
                print(
                    f"WARNING: the log file {self.path} cannot be written ({self._reason}). The run goes on and "
                    f"stdout shows everything; the log file misses the lines from here on until writing works "
                    f"again, and a line there will then say how many are missing. This is reported once.",
                    file=sys.stderr,
                    flush=True,
                )

    def _write(self, data: bytes) -> None:
        view = memoryview(data)
        while view:
            view = view[os.write(self._fd, view) :]

    def close(self) -> None:
        self.write_held(True)  # closed while holding (log.setup again, exit): the lines are the run's
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
        super().close()


def hold_file_writes() -> None:
    """Keep the log files' lines in memory from now on, until ``release_file_writes``: a training writes its log
    only once it holds its model's lock, so that a second run on the same model, refused there, writes nothing
    into the first one's log (its output is on stdout and stderr)."""
    for handler in _log_files():
        handler.held = [] if handler.held is None else handler.held


def release_file_writes(write: bool = True) -> None:
    """Write the lines held back by ``hold_file_writes`` to the log files (``write=False``: drop them) and write
    directly from now on. Nothing happens when nothing is held."""
    for handler in _log_files():
        handler.write_held(write)


def _log_files() -> list[LogFile]:
    return [h for h in logger.handlers if isinstance(h, LogFile) and getattr(h, _HANDLER_TAG, False)]


def to_files(message: str) -> None:
    """Append ``message`` to the log files only (e.g. an error already printed to stderr)."""
    record = logger.makeRecord(logger.name, logging.CRITICAL, __file__, 0, message, None, None)
    for handler in _log_files():
        handler.handle(record)


def enabled(verbosity: int) -> bool:
    """Whether messages at this verbosity level are shown."""
    return logger.isEnabledFor(_level(verbosity))


def v(verbosity: int, message: str) -> None:
    """Log ``message`` at a RETURNN verbosity level (1 = always shown ... 5 = per-step detail)."""
    logger.log(_level(verbosity), message)


def v1(message: str) -> None:
    """Errors."""
    v(1, message)


def v2(message: str) -> None:
    """Warnings."""
    v(2, message)


def v3(message: str) -> None:
    """Epoch summaries."""
    v(3, message)


def v4(message: str) -> None:
    """Setup and progress information."""
    v(4, message)


def v5(message: str) -> None:
    """Per-step detail."""
    v(5, message)


def format_duration(seconds: float) -> str:
    """``0:01:05`` style, as in RETURNN's progress lines."""
    seconds = int(round(max(seconds, 0.0)))
    return f"{seconds // 3600}:{seconds // 60 % 60:02d}:{seconds % 60:02d}"
