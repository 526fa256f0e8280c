"""Where a run writes: probing directories before it starts, free space, and what a failed write means.

A run that can only learn at its first checkpoint, an epoch in, that its directory is read-only
or its disk full has wasted that epoch; the probes here run at startup instead. They write and
remove a small file, because permission bits alone do not tell (root, read-only mounts, quotas).
"""

from __future__ import annotations

import contextlib
import os
import shutil
from collections.abc import Callable
from typing import BinaryIO

from framework.base.errors import ConfigError, WriteError
from framework.base.safe_create import create_new


def beside_checkpoints(prefix: str, name: str) -> str:
    """The path of the run file ``name`` (findings, metrics, attention maps) in the directory of the checkpoints
    that the 'model' option ``prefix`` names."""
    return os.path.join(os.path.dirname(prefix) or ".", name)


def probe_directory(directory: str, what: str, option: str) -> None:
    """Create ``directory`` if needed and write a file into it; ConfigError naming ``option`` if that fails."""
    directory = directory or "."
    probe = os.path.join(directory, f".write-probe-{os.getpid()}")
    try:
        os.makedirs(directory, exist_ok=True)
        with os.fdopen(create_new(probe, f"the write probe of the {what}"), "wb") as f:
            f.write(b"probe")
            f.flush()
            os.fsync(f.fileno())
        os.remove(probe)
    except OSError as exc:
        raise ConfigError(
            f"The {what} {directory!r} cannot be written ({describe_os_error(exc)}). Nothing was started. "
            f"Make it writable or choose another path with the '{option}' option."
        ) from None


def free_bytes(directory: str) -> int | None:
    """Bytes available to this user on the file system of ``directory`` (None if unknown)."""
    try:
        return shutil.disk_usage(directory or ".").free
    except OSError:
        return None


def describe_os_error(exc: BaseException) -> str:
    """``No space left on device`` for an OSError, also one that torch's writer wrapped in a RuntimeError."""
    cause: BaseException | None = exc
    while cause is not None:
        if isinstance(cause, OSError) and cause.errno is not None:
            return os.strerror(cause.errno)
        cause = cause.__cause__ or cause.__context__
    text = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    if "file write failed" in text or "inline_container" in text:  # torch.save's C++ writer hides errno
        return "the write failed (disk full, quota exceeded, file size limit or I/O error)"
    return text


def format_size(num_bytes: float) -> str:
    """``3.2 MB``."""
    for unit in ("bytes", "KB", "MB", "GB"):
        if num_bytes < 1024 or unit == "GB":
            return f"{num_bytes:.0f} {unit}" if unit == "bytes" else f"{num_bytes:.1f} {unit}"
        num_bytes /= 1024
    raise AssertionError("unreachable")


def write_atomically(path: str, write: Callable[[BinaryIO], None], what: str, advice: str) -> None:
    """``write(f)`` into a new temporary file ``f`` beside ``path``, then rename it over ``path``.

    A crash or a full disk leaves the previous file (or none), never a truncated one; the error
    is a WriteError naming ``what`` and ending with ``advice``. The temporary file is created
    without following a link (``safe_create``), and ``write`` gets it open, not its name, so
    nothing can swap it for a link in between.
    """
    tmp = f"{path}.tmp{os.getpid()}"
    try:
        os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
        with os.fdopen(create_new(tmp, what), "w+b") as f:
            write(f)
        os.replace(tmp, path)
    except OSError as exc:
        with contextlib.suppress(OSError):
            os.remove(tmp)
        raise WriteError(
            f"Writing {what} {path} failed: {describe_os_error(exc)}. The partial file was removed. {advice}"
        ) from None
