"""Text files as windows of bytes, for character-level language models."""

from __future__ import annotations

import glob
import os
import sysconfig
import zlib
from typing import Any

import numpy as np

from framework.base.errors import ConfigError
from framework.base.safe_create import refuse_special
from framework.datasets.numpy_dataset import NumpyDataset

_SPLITS = ("train", "dev", "all")


def stdlib_sources() -> list[str]:
    """The ``.py`` files of this Python's standard library, without its tests and installed packages."""
    root = sysconfig.get_paths()["stdlib"]
    skip = {"site-packages", "dist-packages", "test", "tests", "idle_test", "__pycache__"}
    found = []
    for directory, subdirs, names in os.walk(root):
        subdirs[:] = [d for d in subdirs if d not in skip]
        found.extend(os.path.join(directory, name) for name in names if name.endswith(".py"))
    return sorted(found)


def in_dev_split(path: str, dev_fraction: float) -> bool:
    """Whether a file belongs to the dev split.

    A stable hash of the file's name and its directory's name decides, so each file is in one
    split only, the split is the same on every machine, and it does not move when other files
    are added or removed.
    """
    name = os.path.join(os.path.basename(os.path.dirname(path)), os.path.basename(path))
    return zlib.crc32(name.encode()) % 10_000 < dev_fraction * 10_000


class CharTextDataset(NumpyDataset):
    """Text files cut into windows of ``seq_len + 1`` bytes.

    Key ``data``: [seq_len + 1] byte values, uint8 (sparse_dim 256; declare int64 in
    ``extern_data``). A language model reads ``data[:, :-1]`` and predicts ``data[:, 1:]``. Files
    are split into train and dev by a hash of their name, so no file contributes to both; each
    split's files are concatenated in sorted order and cut into windows that overlap by one byte.

    :param split: "train", "dev" or "all".
    :param files: paths or glob patterns (``**`` recurses). None: the ``.py`` files of Python's
        standard library (without its tests), which every Python installation ships.
    :param dev_fraction: share of the files in the dev split.
    :param seq_len: characters (bytes) a model sees per window.
    :param max_chars: read files in sorted order until the split holds this many bytes; None: all.
    """

    def __init__(
        self,
        split: str = "train",
        *,
        files: list[str] | str | None = None,
        dev_fraction: float = 0.05,
        seq_len: int = 128,
        max_chars: int | None = None,
        **kwargs: Any,
    ):
        if split not in _SPLITS:
            raise ConfigError(f"CharTextDataset: split {split!r} is not one of {', '.join(_SPLITS)}.")
        if not 0.0 < dev_fraction < 1.0:
            raise ConfigError(f"CharTextDataset: dev_fraction must be between 0 and 1, got {dev_fraction}.")
        if seq_len < 1:
            raise ConfigError(f"CharTextDataset: seq_len must be at least 1, got {seq_len}.")
        paths = _expand(files)
        if split != "all":
            paths = [p for p in paths if in_dev_split(p, dev_fraction) == (split == "dev")]
        stream = _read_bytes(paths, max_chars)
        if len(stream) < seq_len + 1:
            where = "the standard library's .py files" if files is None else f"files={files!r}"
            raise ConfigError(
                f"CharTextDataset({split}): {len(paths)} file(s) of {where} hold {len(stream)} bytes, fewer than "
                f"one window of seq_len + 1 = {seq_len + 1}. Give more files, a smaller seq_len or a larger "
                f"dev_fraction."
            )
        starts = np.arange(0, len(stream) - seq_len, seq_len)
        windows = stream[starts[:, None] + np.arange(seq_len + 1)]
        super().__init__({"data": windows}, sparse_dims={"data": 256}, **kwargs)
        self.files = paths
        self.name = f"CharTextDataset({split})"


def _expand(files: list[str] | str | None) -> list[str]:
    if files is None:
        found = stdlib_sources()
        if not found:
            raise ConfigError(
                f"CharTextDataset: no .py files under the standard library ({sysconfig.get_paths()['stdlib']}); "
                f"this Python ships without sources. Give 'files': paths or glob patterns of text files."
            )
        return found
    patterns = [files] if isinstance(files, str) else list(files)
    found = sorted({p for pattern in patterns for p in glob.glob(pattern, recursive=True) if os.path.isfile(p)})
    if not found:
        raise ConfigError(
            f"CharTextDataset: files={files!r} matches no file (working directory: {os.getcwd()}). Give paths or "
            f"glob patterns such as 'texts/**/*.txt'."
        )
    return found


def _read_bytes(paths: list[str], max_chars: int | None) -> np.ndarray:
    chunks, total = [], 0
    for path in paths:
        refuse_special(path, "a text file of the dataset")
        with open(path, "rb") as f:
            chunks.append(f.read())
        total += len(chunks[-1])
        if max_chars is not None and total >= max_chars:
            break
    return np.frombuffer(b"".join(chunks)[:max_chars], dtype=np.uint8)


DATASETS = (CharTextDataset,)
