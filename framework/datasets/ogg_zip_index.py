"""Where an ``OggZipDataset``'s index and audio come from, as RETURNN finds them.

- ``<name>.zip`` holds the index ``<name>.txt`` (a Python literal list of dicts) and the audio under ``<name>/``;
- ``<name>.txt.gz`` listed among the paths replaces the index inside ``<name>.zip`` (RETURNN's separate index);
- a directory ``<dir>/<name>`` beside ``<dir>/<name>.txt`` is read from the file system (RETURNN's debugging
  layout, one path only): the index is ``<name>.txt``, the audio under ``<dir>/<name>/``.

``content_name`` replaces the names taken from the file names; ``resolve_symlink_for_name`` takes them from the
files the paths link to.
"""

from __future__ import annotations

import ast
import gzip
import os
import zipfile
from dataclasses import dataclass
from typing import Any

from framework.base.errors import ConfigError
from framework.base.safe_create import refuse_special


@dataclass
class Archive:
    """One source of audio: a zip, or the directory that holds ``<name>/`` (``is_dir``)."""

    path: str
    name: str
    #: a separate index file (``.txt.gz``, or ``<dir>/<name>.txt`` for a directory); None: ``<name>.txt`` in the zip
    index: str | None = None
    is_dir: bool = False


def find_archives(paths: list[str], content_name: Any, resolve_symlink: bool) -> list[Archive]:
    """The archives ``paths`` name, with their separate indexes attached."""
    if len(paths) == 1 and not paths[0].endswith(".zip") and os.path.isdir(paths[0]):
        directory = paths[0].rstrip("/")
        if os.path.isfile(directory + ".txt"):
            if content_name is not None or resolve_symlink:
                raise ConfigError(
                    "OggZipDataset: a directory path reads <dir>/<name>.txt and <dir>/<name>/ as they are; content_name "
                    "and resolve_symlink_for_name do not apply to it (RETURNN does not implement them either)."
                )
            parent, name = os.path.split(directory)
            return [Archive(parent or ".", name, directory + ".txt", is_dir=True)]
    names = content_name if isinstance(content_name, (list, tuple)) else [content_name] * len(paths)
    if len(names) != len(paths):
        raise ConfigError(f"OggZipDataset: content_name lists {len(names)} names for {len(paths)} paths.")
    archives: list[Archive] = []
    separate: dict[str, str] = {}
    for path, given in zip(paths, names, strict=True):
        base = os.path.basename(os.path.realpath(path) if resolve_symlink else path)
        if base.endswith(".txt.gz"):
            separate[given or base[: -len(".txt.gz")]] = path
        elif base.endswith(".zip"):
            archives.append(Archive(path, given or base[: -len(".zip")]))
        else:
            raise ConfigError(
                f"OggZipDataset: {path} is not a .zip (nor a separate <name>.txt.gz index, nor a directory beside a "
                f"<name>.txt); RETURNN's ogg zips are <name>.zip with <name>.txt inside."
            )
    for archive in archives:
        archive.index = separate.pop(archive.name, None)
    if separate:
        raise ConfigError(
            f"OggZipDataset: the index {next(iter(separate.values()))} has no zip of the same name among the paths "
            f"({', '.join(a.path for a in archives) or 'none'})."
        )
    return archives


def read_index(archive: Archive) -> list[dict[str, Any]]:
    """The entries of the archive's index."""
    where = archive.index or f"{archive.path}:{archive.name}.txt"
    try:
        if archive.index is not None:
            refuse_special(archive.index, "an index file of OggZipDataset")
            with gzip.open(archive.index, "rb") if archive.index.endswith(".gz") else open(archive.index, "rb") as f:
                text = f.read()
        else:
            refuse_special(archive.path, "a zip file of OggZipDataset")
            with zipfile.ZipFile(archive.path) as f:
                text = f.read(f"{archive.name}.txt")
    except (OSError, EOFError, zipfile.BadZipFile) as exc:
        raise ConfigError(f"OggZipDataset: cannot read {where!r} ({exc}). Is it a zip (or a gzipped index)?") from None
    except KeyError:
        raise ConfigError(
            f"OggZipDataset: {archive.path} has no index {archive.name}.txt (RETURNN's layout: <name>.txt beside "
            f"<name>/ with the audio). Give content_name if the zip was renamed."
        ) from None
    try:
        entries = ast.literal_eval(text.decode("utf8"))
    except (ValueError, SyntaxError) as exc:
        raise ConfigError(f"OggZipDataset: {where} is not a Python literal list of dicts ({exc}).") from None
    if not isinstance(entries, list) or not all(
        isinstance(e, dict) and isinstance(e.get("text"), str) and isinstance(e.get("duration"), (int, float))
        for e in entries
    ):
        raise ConfigError(
            f"OggZipDataset: {where} must be a list of dicts with 'text' (str), 'duration' (seconds) and 'file' or "
            f"'seq_name', as RETURNN writes it."
        )
    return entries
