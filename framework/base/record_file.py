"""Files of one record per line that a run appends to (``findings.jsonl``, ``metrics.jsonl``): never a broken line.

Readers parse such a file line by line, so one broken line makes the whole file unreadable to them. A line
breaks when a run dies in the middle of writing it (a full disk cut the write short, SIGKILL between two
parts of a long write) and the next run appends to it. Hence, for every file of this kind:

- when it is opened, a last line without its newline (what a run that died while writing left) is moved to
  ``<file>.partial`` and cut off, and the log says so once: the records before it stay as they were;
- every write is checked: a write cut short is continued; a write that fails (full disk, lost permission)
  is undone (the file is cut back to where the record began) and reported as a ``WriteError`` naming the
  file and the reason, after which the file takes no more records.

The file is opened without following a planted link and refused if it is not a regular file
(``safe_create.open_kept``); one process writes it (the run that holds the model's lock).
"""

from __future__ import annotations

import os
import shlex

from framework.base import log
from framework.base.disk import describe_os_error
from framework.base.errors import WriteError
from framework.base.safe_create import open_kept

PARTIAL_SUFFIX = ".partial"
_TAIL_CHUNK = 1 << 16  # how much of the file's end is read at a time when looking for its last newline


class RecordFile:
    """One append-only file of records, one per line; ``append`` writes whole lines or nothing."""

    def __init__(self, path: str, what: str, advice: str):
        """``what`` names the file in messages ("the findings file"); ``advice`` ends the message of a failed write
        (what happens now and what to do)."""
        self.path, self.what, self.advice = path, what, advice
        self._fd: int | None = None
        self.failed: str | None = None  # why writing failed: no record is written after that

    @property
    def is_open(self) -> bool:
        return self._fd is not None

    def open(self) -> None:
        """Open the file (created if missing) for appending, first setting aside a partial last line.

        WriteError if it cannot be opened or repaired (permissions, a full disk); PlantedLinkError / ConfigError for
        a link or a file that is not a regular file at the path. The file is left as it was then.
        """
        try:
            fd = open_kept(self.path, self.what, os.O_RDWR | os.O_APPEND)
        except OSError as exc:
            raise WriteError(
                f"Opening {self.what} {self.path} failed: {describe_os_error(exc)}. {self.advice}"
            ) from None
        try:
            self._set_aside_partial_line(fd)
        except OSError as exc:
            os.close(fd)
            raise WriteError(
                f"Setting aside the line cut short at the end of {self.what} {self.path} failed: "
                f"{describe_os_error(exc)}. {self.advice}"
            ) from None
        except BaseException:
            os.close(fd)
            raise
        self._fd = fd

    def append(self, lines: list[str]) -> None:
        """Write ``lines`` (each without its newline) at the end of the file, as whole lines.

        WriteError if the write fails: the file then ends with the last record written before, and takes no more.
        """
        if self._fd is None or self.failed is not None or not lines:
            return
        data = memoryview("".join(line + "\n" for line in lines).encode("utf-8", "backslashreplace"))
        size = os.fstat(self._fd).st_size  # one writer (the model's lock): the records begin here
        try:
            while data:
                written = os.write(self._fd, data)
                if written == 0:  # no progress and no error: a device that takes nothing
                    raise OSError(0, "the file system took no more bytes")
                data = data[written:]
        except OSError as exc:
            self.failed = describe_os_error(exc) if exc.errno else str(exc.strerror)
            try:
                os.ftruncate(self._fd, size)  # a record cut short would break the file for every reader
                undone = "the records written before are intact"
            except OSError:
                undone = f"its last line may be cut short; the next run sets it aside ({self.path}{PARTIAL_SUFFIX})"
            self.close()
            raise WriteError(
                f"Writing {self.what} {self.path} failed: {self.failed}; {undone}. {self.advice}"
            ) from None

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def _set_aside_partial_line(self, fd: int) -> None:
        size = os.fstat(fd).st_size
        if size == 0 or os.pread(fd, 1, size - 1) == b"\n":
            return
        end = _last_line_start(fd, size)
        partial = os.pread(fd, size - end, end)
        aside = self.path + PARTIAL_SUFFIX
        kept = open_kept(aside, f"the partial lines of {self.what}", os.O_WRONLY | os.O_APPEND)
        try:
            data = memoryview(partial + b"\n")
            while data:
                data = data[os.write(kept, data) :]
        finally:
            os.close(kept)
        os.ftruncate(fd, end)
        log.v2(
            f"{self.path} ended in a line cut short ({len(partial)} bytes without a newline: a run stopped while "
            f"writing it). That line was moved to {aside} and the file continues after its last complete record "
            f"(cat {shlex.quote(aside)} shows it)."
        )


def _last_line_start(fd: int, size: int) -> int:
    """Where the file's last line begins: after its last newline (0 if it has none)."""
    end = size
    while end > 0:
        begin = max(0, end - _TAIL_CHUNK)
        found = os.pread(fd, end - begin, begin).rfind(b"\n")
        if found >= 0:
            return begin + found + 1
        end = begin
    return 0
