"""Creating files in a directory that others may write to: never through a planted link.

In a shared model directory (group-writable, a team's scratch space) anyone can put a symbolic
link where a run is about to create a file, ``model.lock -> ~/.bashrc``; a run that opened the
path as usual would write its lock, probe or checkpoint into the link's target. Every file the
framework creates is therefore opened with ``O_NOFOLLOW`` (a link at the path is an error that
names it) and, where the file must be new (temporary files, probes), with ``O_EXCL``: a fresh
file, never someone else's. Files it keeps writing to (the lock, logs) must be regular files with
no second name (a hard link would make the writes land in another file too). Finished files are
renamed into place with ``os.replace``, which replaces a link at the target without following it.

Special files (a FIFO, a socket, a device) are refused wherever the framework opens a file, by name and
without waiting: opening a FIFO blocks until someone opens its other end, which may be never. Files
are opened with ``O_NONBLOCK`` and checked with ``fstat`` before anything is read or written
(``open_for_reading``, ``open_kept``); a path handed to a library that opens it itself (h5py, numpy,
torch) is checked with ``os.stat`` first (``refuse_special``).
"""

from __future__ import annotations

import errno
import os
import shlex
import stat

from framework.base.errors import ConfigError, PlantedLinkError

_NO_FOLLOW = getattr(os, "O_NOFOLLOW", 0)
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_NONBLOCK = getattr(os, "O_NONBLOCK", 0)


def create_new(path: str, what: str, mode: int = 0o666) -> int:
    """A new, empty file at ``path`` opened for reading and writing (its fd).

    A regular file already there (a temporary file of a killed run that had this PID) is replaced;
    a link is a PlantedLinkError naming it. Other OSErrors (permissions, a full disk) propagate.
    """
    flags = os.O_RDWR | os.O_CREAT | os.O_EXCL | _NO_FOLLOW | _CLOEXEC
    try:
        return os.open(path, flags, mode)
    except FileExistsError:
        refuse_unless_regular(path, what, os.lstat(path))
        os.remove(path)
        try:
            return os.open(path, flags, mode)
        except FileExistsError:  # created again at once: someone races this run for the name
            refuse_unless_regular(path, what, os.lstat(path))
            raise


def open_kept(path: str, what: str, flags: int, mode: int = 0o644) -> int:
    """Open (creating it if missing) a file that the run keeps writing to, e.g. its lock or log (its fd).

    ``flags`` are added to ``O_CREAT | O_NOFOLLOW``. A link, a file with a second name (hard link)
    or something other than a regular file or character device (``/dev/null``) at ``path`` is refused with a
    message naming it, a FIFO too, without waiting for a reader.
    """
    try:
        fd = os.open(path, flags | os.O_CREAT | _NO_FOLLOW | _CLOEXEC | _NONBLOCK, mode)
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.EISDIR, errno.ENXIO):  # ENXIO: a FIFO no one reads
            refuse_unless_regular(path, what, os.lstat(path))
        raise
    try:
        info = os.fstat(fd)
        if not stat.S_ISCHR(info.st_mode):  # /dev/null or /dev/full as a log file is the user's choice
            refuse_unless_regular(path, what, info)
        _block_again(fd)
    except BaseException:
        os.close(fd)
        raise
    return fd


def open_for_reading(path: str, what: str) -> int:
    """``path`` opened for reading (its fd), refused with a ConfigError naming it and ``what`` unless it is a
    regular file (a FIFO, socket, device or directory); a missing or unreadable file is an OSError."""
    fd = os.open(path, os.O_RDONLY | _CLOEXEC | _NONBLOCK)
    try:
        refuse_special(path, what, os.fstat(fd))
        _block_again(fd)
    except BaseException:
        os.close(fd)
        raise
    return fd


def refuse_special(path: str, what: str, info: os.stat_result | None = None) -> None:
    """ConfigError naming ``path`` and ``what`` if it is not a regular file (``info``: its stat, default ``os.stat``):
    for a path that a library opens itself (h5py, numpy, torch), so that it never waits on a FIFO. A missing
    path is left to the caller's own error."""
    if info is None:
        try:
            info = os.stat(path)
        except FileNotFoundError:
            return
    if stat.S_ISREG(info.st_mode):
        return
    if stat.S_ISDIR(info.st_mode):
        raise ConfigError(
            f"{path} ({what}) is a directory, where a file is expected. Nothing was read from it. Give the path of "
            f"the file itself."
        )
    raise ConfigError(
        f"{path} ({what}) is {file_kind(info)}, not a regular file: opening it could wait forever, and its "
        f"content is not a file's. Nothing was read from it. Give the path of a regular file."
    )


def file_kind(info: os.stat_result) -> str:
    """What a file that is not a regular file is, for messages: "a FIFO (named pipe)", "a socket", ..."""
    mode = info.st_mode
    if stat.S_ISFIFO(mode):
        return "a FIFO (named pipe)"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISCHR(mode):
        return "a character device"
    if stat.S_ISBLK(mode):
        return "a block device"
    return "not a regular file"


def _block_again(fd: int) -> None:
    """Clear ``O_NONBLOCK`` (only the open had to not wait): a terminal or device then behaves as usual."""
    if _NONBLOCK:
        os.set_blocking(fd, True)


def make_directory(path: str, what: str) -> None:
    """Create the directory ``path`` (and its missing parents) unless it is there; a link at ``path`` is refused.

    Files inside it are then created by name: a link in place of the directory would put them wherever it points,
    so it is a PlantedLinkError naming it (a file there: ConfigError), and nothing is written.
    """
    if not os.path.islink(path):
        os.makedirs(path, exist_ok=True)
    info = os.lstat(path)
    if stat.S_ISLNK(info.st_mode):
        raise PlantedLinkError(
            f"{path} ({what}) is a symbolic link to {_link_target(path)!r}. The framework writes files into this "
            f"directory and never through a link: anyone who can write to {os.path.dirname(os.path.abspath(path))} "
            f"could make the run write wherever the link points. Nothing was written through it. Remove the link "
            f"(rm {shlex.quote(path)}) or point the option at the real directory."
        )
    if not stat.S_ISDIR(info.st_mode):
        raise ConfigError(
            f"{path} ({what}) is not a directory, and the framework needs to write files into a directory of this "
            f"name. Nothing was written. Move it away (mv {shlex.quote(path)} {shlex.quote(path + '.moved')}) or "
            f"choose another path."
        )


def refuse_unless_regular(path: str, what: str, info: os.stat_result) -> None:
    """PlantedLinkError for a link or a hard-linked file at ``path``, ConfigError for a directory or the like."""
    directory = os.path.dirname(os.path.abspath(path))
    if stat.S_ISLNK(info.st_mode):
        raise PlantedLinkError(
            f"{path} ({what}) is a symbolic link to {_link_target(path)!r}. The framework creates this file "
            f"itself and never writes through a link: anyone who can write to {directory} could make the run "
            f"overwrite the link's target this way. Nothing was written through it. Remove the link "
            f"(rm {shlex.quote(path)}) and keep the directory writable only by people you trust, or choose "
            f"another directory."
        )
    if stat.S_ISREG(info.st_mode) and info.st_nlink > 1:
        raise PlantedLinkError(
            f"{path} ({what}) is a file with {info.st_nlink} names (hard links): writing it would change the "
            f"other names' contents too. Nothing was written to it. Remove it (rm {shlex.quote(path)}; its other "
            f"names keep their content) and keep {directory} writable only by people you trust."
        )
    if not stat.S_ISREG(info.st_mode):
        kind = "a directory" if stat.S_ISDIR(info.st_mode) else file_kind(info)
        raise ConfigError(
            f"{path} ({what}) is {kind}, and the framework needs to create a file of this name there. Nothing was "
            f"written. Move it away (mv {shlex.quote(path)} {shlex.quote(path + '.moved')}) or choose another path."
        )


def _link_target(path: str) -> str:
    try:
        return os.readlink(path)
    except OSError:
        return "?"
