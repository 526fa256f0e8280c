"""RETURNN's HDF format, read and written with h5py.

The layout (RETURNN's ``HDFDataset`` and ``SimpleHDFWriter``): the main key ``data`` is the
dataset ``inputs``, all sequences concatenated along time ([total frames, dim], or [total frames]
for class ids); other keys live in ``targets/data/<key>`` with ``targets/size`` attributes
``[dim, ndim]``; ``seqLengths`` [sequences, 1 + keys] holds each sequence's length per key
(``inputs`` first, then the other keys sorted by name); ``seqTags`` names the sequences; the
attributes ``numSeqs``, ``numTimesteps``, ``inputPattSize`` and ``numLabels`` describe ``inputs``.

Files written here carry HDF5's Fletcher-32 checksum on every numeric dataset (RETURNN and any
h5py reader read them unchanged); reading verifies it, so a damaged file is an error naming the
file, key and sequence instead of silently changed data. Files without checksums (RETURNN's own)
cannot be verified.
"""

from __future__ import annotations

import os
from typing import Any, BinaryIO

import numpy as np

from framework.base.disk import write_atomically
from framework.base.errors import ConfigError, DataError
from framework.base.safe_create import refuse_special
from framework.base.util import printable
from framework.datasets.base import Dataset, note_no_cache_manager


class HDFDataset(Dataset):
    """Sequences from RETURNN HDF files, read on demand (only the lengths are loaded up front).

    :param files: one path or a list of paths; their sequences are concatenated.
    :param use_cache_manager: RETURNN copies the files through its cluster's cache manager first; here they are
        read in place (said once in the log).
    :param cache_byte_size: RETURNN's cache of loaded sequences in memory; no effect (read on demand here).
    """

    returnn_window = "stacks"  # what RETURNN's class does with window (context_window.py)
    returnn_worker_shards = True  # RETURNN's class shards over DataLoader workers (supports_sharding)
    returnn_sortable = True  # RETURNN's class supports_seq_order_sorting: its forward run sorts it

    def __init__(
        self,
        files: str | list[str],
        *,
        use_cache_manager: bool = False,
        cache_byte_size: int | None = None,
        **kwargs: Any,
    ):
        super().__init__(**kwargs)
        del cache_byte_size  # RETURNN's in-memory cache of read sequences: the files are read on demand here
        self.files = [files] if isinstance(files, str) else list(files)
        if not self.files:
            raise ConfigError("HDFDataset: 'files' is empty; give the path of at least one HDF file.")
        if use_cache_manager:
            note_no_cache_manager("HDFDataset", self.files)
        self._handles: dict[str, Any] = {}
        self._pid = os.getpid()
        self._locations: list[tuple[int, int]] = []  # sequence -> (file number, index in the file)
        self._starts: list[np.ndarray] = []  # per file: [sequences + 1, keys] offsets
        self._lengths: list[np.ndarray] = []  # per file: [sequences, keys]
        self._tags: list[str] = []
        self._info: dict[str, dict[str, Any]] | None = None
        self._columns: dict[str, tuple[str, int]] = {}
        for number, path in enumerate(self.files):
            info, columns, lengths, tags = _read_index(path)
            if self._info is not None and info != self._info:
                raise ConfigError(f"HDFDataset: {path} holds {info}, but {self.files[0]} holds {self._info}.")
            self._info, self._columns = info, columns
            starts = np.zeros((len(lengths) + 1, lengths.shape[1]), dtype=np.int64)
            np.cumsum(lengths, axis=0, out=starts[1:])
            self._lengths.append(lengths)
            self._starts.append(starts)
            self._tags.extend(tags)
            self._locations.extend((number, i) for i in range(len(lengths)))
        self.name = f"HDFDataset({', '.join(os.path.basename(p) for p in self.files)})"

    @property
    def num_seqs(self) -> int:
        return len(self._locations)

    def key_info(self) -> dict[str, dict[str, Any]]:
        return {key: dict(value) for key, value in self._info.items()}

    def seq_tag(self, index: int) -> str:
        """The sequence's name in the file (RETURNN's sequence tag)."""
        return self._tags[index]

    def seq_lengths(self) -> np.ndarray:
        return np.concatenate([lengths.max(axis=1) for lengths in self._lengths]).astype(np.int64)

    def lengths_of(self, key: str) -> np.ndarray:
        column = self._columns[key][1]
        return np.concatenate([lengths[:, column] for lengths in self._lengths]).astype(np.int64)

    def get_seq(self, index: int) -> dict[str, np.ndarray]:
        number, i = self._locations[index]
        f = self._file(number)
        seq = {}
        for key, (path, column) in self._columns.items():
            start, length = self._starts[number][i, column], self._lengths[number][i, column]
            try:
                seq[key] = np.asarray(f[path][start : start + length])
            except OSError as exc:  # h5py's checksum failure ("filter returned failure") and read errors
                raise DataError(
                    f"HDFDataset: {self.files[number]} cannot be read at key {key!r} ({path}), sequence {i} "
                    f"({self._tags[index]!r}): {printable(str(exc))}. The file is damaged (a failed checksum or a "
                    f"truncated file). Write it again, or restore it from a copy."
                ) from None
        return seq

    def _file(self, number: int) -> Any:
        """The open file; reopened in a new process (DataLoader workers), as h5py handles do not survive a fork."""
        import h5py

        if self._pid != os.getpid():
            self._handles, self._pid = {}, os.getpid()
        path = self.files[number]
        if path not in self._handles:
            self._handles[path] = h5py.File(path, "r")
        return self._handles[path]

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "_handles": {}}


def _read_index(path: str) -> tuple[dict[str, dict[str, Any]], dict[str, tuple[str, int]], np.ndarray, list[str]]:
    """What one file holds: key info, columns, sequence lengths [sequences, keys] and tags."""
    import h5py

    refuse_special(path, "a file of HDFDataset")
    try:
        f = h5py.File(path, "r")
    except OSError as exc:
        raise ConfigError(f"HDFDataset: cannot open {path!r} ({exc}). Is it an HDF file?") from None
    with f:
        try:
            info, columns = _describe(f, path)
            lengths = np.asarray(f["seqLengths"][...], dtype=np.int64).reshape(int(f.attrs["numSeqs"]), -1)
            if "seqTags" in f:
                tags = [_decode(t) for t in f["seqTags"][...]]
            else:
                tags = [f"{os.path.basename(path)}/seq-{i}" for i in range(len(lengths))]
            _check_lengths(f, path, columns, lengths)
        except KeyError as exc:  # h5py's KeyError names the object but not the file
            missing = printable(str(exc.args[0] if exc.args else exc))
            raise ConfigError(
                f"HDFDataset: {path} is not a complete RETURNN HDF file: {missing}. Every key in targets/size needs "
                f"its data in targets/data/<key> and the reverse; write the file again (e.g. with RETURNN's "
                f"SimpleHDFWriter)."
            ) from None
        except OSError as exc:  # a failed checksum, a truncated file
            raise DataError(
                f"HDFDataset: {path} cannot be read ({printable(str(exc))}). The file is damaged; write it again or "
                f"restore it from a copy."
            ) from None
    return info, columns, lengths, tags


def _check_lengths(f: Any, path: str, columns: dict[str, tuple[str, int]], lengths: np.ndarray) -> None:
    """DataError unless each key's sequence lengths are non-negative and add up to no more than its data holds
    (else sequences would read as cut short or empty, silently)."""
    for key, (hdf_path, column) in columns.items():
        if column >= lengths.shape[1]:  # read as get_seq reads it; not this check's question
            continue
        own = lengths[:, column]
        frames = int(f[hdf_path].shape[0])
        if (own < 0).any() or int(own.sum()) > frames:
            ends = np.cumsum(own)
            beyond = int((ends > frames).sum())
            raise DataError(
                f"HDFDataset: {path}: the sequence lengths of key {key!r} (seqLengths column {column}) add up to "
                f"{int(own.sum())} frames{' and include negative ones' if (own < 0).any() else ''}, but {hdf_path} "
                f"holds {frames}: {beyond} of its {len(own)} sequences would be read cut short or empty. The file is "
                f"truncated or its lengths are wrong; write it again or restore it from a copy."
            )


def _describe(f: Any, path: str) -> tuple[dict[str, dict[str, Any]], dict[str, tuple[str, int]]]:
    """Key info and, per key, (HDF path, column in seqLengths) of one RETURNN HDF file."""
    if "seqLengths" not in f or "numSeqs" not in f.attrs:
        raise ConfigError(f"HDFDataset: {path} is not in RETURNN's HDF format (no seqLengths / numSeqs).")
    info, columns = {}, {}
    if "inputs" in f:
        inputs = f["inputs"]
        sparse = inputs.ndim == 1
        dim = int(f.attrs.get("inputPattSize", 1)) if sparse else int(inputs.shape[-1])
        info["data"] = _key_info(inputs, dim if sparse else None)
        columns["data"] = ("inputs", 0)
    first = len(columns)
    if "targets" in f:
        keys = sorted(set(f["targets/data"].keys()) | set(f["targets/size"].attrs.keys()))
        for column, key in enumerate(keys, start=first):
            if key not in f["targets/data"] or key not in f["targets/size"].attrs:
                where = "targets/data" if key not in f["targets/data"] else "the attributes of targets/size"
                raise KeyError(f"key {key!r} is missing in {where}")
            data = f["targets/data"][key]
            dim, ndim = (list(f["targets/size"].attrs[key]) + [None, None])[:2]
            sparse = data.ndim == 1 and ndim == 1 and data.dtype.kind in "iu"
            info[key] = _key_info(data, int(dim) if sparse and dim else None)
            columns[key] = (f"targets/data/{key}", column)
    return info, columns


def _key_info(data: Any, sparse_dim: int | None) -> dict[str, Any]:
    return {"shape": (None,) + tuple(data.shape[1:]), "dtype": str(data.dtype), "sparse_dim": sparse_dim}


def _decode(tag: Any) -> str:
    return tag.decode("utf8") if isinstance(tag, bytes) else str(tag)


def write_hdf(
    path: str,
    outputs: dict[str, list[np.ndarray]],
    tags: list[str],
    main: str,
    sparse_dims: dict[str, int] | None = None,
) -> None:
    """Write per-sequence arrays [T_i, ...] in RETURNN's format: ``main`` as the inputs, the rest as targets.

    Atomic: written to a temporary file, then renamed; numeric datasets carry a Fletcher-32 checksum.
    ``sparse_dims`` gives the class count of id keys.
    """
    import h5py

    sparse_dims = sparse_dims or {}
    others = sorted(k for k in outputs if k != main)

    def write(file: BinaryIO) -> None:
        with h5py.File(file, "w") as f:
            rows = outputs[main]
            inputs = np.concatenate(rows, axis=0) if rows else np.zeros((0,))
            f.create_dataset("inputs", data=inputs, fletcher32=True)
            dim = sparse_dims.get(main) if inputs.ndim == 1 else int(np.prod(inputs.shape[1:]))
            f.attrs["inputPattSize"] = f.attrs["numLabels"] = dim or 1
            f.attrs["numDims"] = 1
            f.attrs["numSeqs"] = len(rows)
            f.attrs["numTimesteps"] = len(inputs)
            f.create_dataset("labels", (0,), dtype="S5")
            lengths = [[len(r) for r in rows]] + [[len(r) for r in outputs[k]] for k in others]
            if not others:  # RETURNN's reader expects a column for its default target even when there is none
                lengths.append(lengths[0])
            seq_lengths = np.array(lengths, dtype=np.int32).T.reshape(len(rows), -1)
            f.create_dataset("seqLengths", data=seq_lengths, fletcher32=True)
            f.create_dataset("seqTags", data=np.array(tags, dtype=object), dtype=h5py.string_dtype())
            if others:
                for group in ("targets/data", "targets/size", "targets/labels"):
                    f.create_group(group)
            for key in others:
                data = np.concatenate(outputs[key], axis=0)
                f["targets/data"].create_dataset(key, data=data, fletcher32=True)
                key_dim = sparse_dims.get(key, 1) if data.ndim == 1 else data.shape[-1]
                f["targets/size"].attrs[key] = [key_dim, data.ndim]

    write_atomically(path, write, "the HDF file", "Free space or choose another path with 'output_file'.")


DATASETS = (HDFDataset,)
