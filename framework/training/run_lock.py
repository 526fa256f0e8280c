"""One writer per model prefix: ``<model>.lock``, held with ``fcntl.flock`` while a run trains.

Two runs on one prefix would overwrite each other's checkpoints and interleave their logs. The
kernel releases a flock when its holder dies, however it dies (SIGKILL, OOM killer, power cut of
a node), so a lock left by a dead run never blocks the next one: the file is only a place to
hold the lock and to say who holds it (PID, host, start time, command line). A run that ends
removes the file while still holding the lock; a run that locked a file which is no longer the
one at the path (removed or replaced meanwhile) tries again, so two runs never hold two files.

flock is advisory and, on some network file systems, local to one host; the holder's host is
named so a user can tell.

The lock binds only while its file is the one at the path: a user or script that deletes the model
directory (or the lock file) mid-run frees the prefix for a second run. ``verify`` notices, and the
engine calls it before every checkpoint, so the run stops instead of writing beside another. The
file is opened without following a link (``safe_create``); what it says about another holder is
printed with control characters escaped.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import socket
import time

from framework.base.errors import LockLostError, ModelInUseError
from framework.base.safe_create import open_kept
from framework.base.util import command_line, printable


def lock_path(prefix: str) -> str:
    """``output/model.lock`` for prefix ``output/model``."""
    return f"{prefix}.lock"


class RunLock:
    """The lock of one model prefix, taken with ``acquire`` and given back with ``release``."""

    def __init__(self, prefix: str):
        self.prefix = prefix
        self.path = lock_path(prefix)
        self._fd: int | None = None
        self._written = b""  # what this run wrote into the file: it must still be there

    def acquire(self) -> None:
        """Take the lock or raise ModelInUseError naming the holder; OSError if the file cannot be written."""
        os.makedirs(os.path.dirname(os.path.abspath(self.path)), exist_ok=True)
        while True:
            fd = open_kept(self.path, "the lock of this model prefix", os.O_RDWR)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                holder = printable(os.pread(fd, 4096, 0).decode("utf-8", "replace").strip())
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
            self._written = text.encode("utf-8")
            os.ftruncate(fd, 0)
            os.pwrite(fd, self._written, 0)
            os.fsync(fd)
        except BaseException:
            os.close(fd)  # closing releases the lock
            raise
        self._fd = fd

    def verify(self, before: str) -> None:
        """LockLostError unless the lock file at the path is still this run's, saying what this run did not do.

        ``before`` completes "This run stopped before ...", e.g. "writing model.003.pt".
        """
        if self._fd is None:
            return
        directory = os.path.dirname(os.path.abspath(self.path))
        if not os.path.isdir(directory):
            problem = f"the model directory {directory} was deleted"
        elif not _same_file(self._fd, self.path):
            problem = f"its lock file {self.path} was deleted or replaced"
        elif os.pread(self._fd, len(self._written) + 1, 0) != self._written:
            problem = f"its lock file {self.path} was overwritten"
        else:
            return
        raise LockLostError(
            f"This run no longer holds the lock of model {self.prefix!r}: {problem} while it ran. Another run may "
            f"already be writing this prefix, so this run stopped before {before} instead of writing beside it; "
            f"files written so far were left as they are. Find out who removed it; to go on, make sure no other run "
            f"trains this prefix and run the same command again (it resumes from the newest checkpoint there)."
        )

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
