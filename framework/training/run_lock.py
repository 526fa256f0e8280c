"""One writer per model prefix: ``<model>.lock``, held with ``fcntl.flock`` while a run trains.

Two runs on one prefix would overwrite each other's checkpoints and interleave their logs. The
kernel releases a flock when its holder dies, however it dies (SIGKILL, OOM killer, power cut of
a node), so a lock left by a dead run never blocks the next one: the file is only a place to
hold the lock and to say who holds it (PID, host, start time, command line). A run that ends
removes the file while still holding the lock; a run that locked a file which is no longer the
one at the path (removed or replaced meanwhile) tries again, so two runs never hold two files.

flock is advisory and, on some network file systems, local to one host; the holder's host is
named so a user can tell.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import socket
import time

from framework.errors import ModelInUseError
from framework.util import command_line


def lock_path(prefix: str) -> str:
    """``output/model.lock`` for prefix ``output/model``."""
    return f"{prefix}.lock"


class RunLock:
    """The lock of one model prefix, taken with ``acquire`` and given back with ``release``."""

    def __init__(self, prefix: str):
        self.prefix = prefix
        self.path = lock_path(prefix)
        self._fd: int | None = None

    def acquire(self) -> None:
        """Take the lock or raise ModelInUseError naming the holder; OSError if the file cannot be written."""
        os.makedirs(os.path.dirname(os.path.abspath(self.path)), exist_ok=True)
        while True:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                holder = os.pread(fd, 4096, 0).decode("utf-8", "replace").strip()
                os.close(fd)
                raise ModelInUseError(self._in_use_message(holder)) from None
            except BaseException:
                os.close(fd)
                raise
            if _same_file(fd, self.path):
                break
            os.close(fd)  # its holder removed it after we opened it: lock the file now at the path
        try:
            started = time.strftime("%Y-%m-%d %H:%M:%S")
            text = f"pid {os.getpid()} on {socket.gethostname()} since {started}: {command_line()}\n"
            os.ftruncate(fd, 0)
            os.pwrite(fd, text.encode("utf-8"), 0)
            os.fsync(fd)
        except BaseException:
            os.close(fd)  # closing releases the lock
            raise
        self._fd = fd

    def release(self) -> None:
        """Remove the lock file and give the lock back (the kernel gives it back if the process dies)."""
        if self._fd is not None:
            with contextlib.suppress(OSError):
                if _same_file(self._fd, self.path):
                    os.remove(self.path)
            os.close(self._fd)
            self._fd = None

    def _in_use_message(self, holder: str) -> str:
        who = holder or "a process that has just started (it has not written its PID yet)"
        pid = holder.split()[1] if holder.startswith("pid ") else None
        stop = f"stop it (kill {pid}: it writes a checkpoint this run can resume from)" if pid else "stop it"
        return (
            f"Another run is training model {self.prefix!r}: {who}. Two runs writing one model prefix would "
            f"overwrite each other's checkpoints and logs, so this one did not start. Wait for it to end, {stop}, "
            f"or give this run its own prefix (++model {self.prefix}_2). The lock is {self.path}; it frees "
            f"itself when that process ends."
        )


def _same_file(fd: int, path: str) -> bool:
    try:
        on_disk = os.stat(path)
    except FileNotFoundError:
        return False
    held = os.fstat(fd)
    return (on_disk.st_dev, on_disk.st_ino) == (held.st_dev, held.st_ino)
