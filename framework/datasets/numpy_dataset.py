"""A dataset from numpy arrays, in memory or memory-mapped; the base of the shipped datasets."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from framework.base.errors import ConfigError
from framework.base.safe_create import refuse_special
from framework.datasets.base import Dataset, pad_sequences


class Ragged(Sequence):
    """N variable-length sequences stored as one flat array [sum T_i, ...] and offsets [N + 1].

    Both may be memory-mapped ``.npy`` files: nothing is read until a sequence is, and the
    lengths are one ``np.diff``.
    """

    def __init__(self, values: np.ndarray, offsets: np.ndarray):
        if offsets.ndim != 1 or len(offsets) == 0 or offsets[0] != 0 or offsets[-1] != len(values):
            raise ConfigError(
                f"Ragged data: offsets must be 1-d, start at 0 and end at the number of rows of the values "
                f"({len(values)}), got {len(offsets)} offsets from {offsets[:1]} to {offsets[-1:]}."
            )
        self.values, self.offsets = values, np.asarray(offsets, dtype=np.int64)
        self.lengths = np.diff(self.offsets)
        if (self.lengths < 0).any():
            raise ConfigError("Ragged data: offsets must not decrease.")

    def __len__(self) -> int:
        return len(self.offsets) - 1

    def __getitem__(self, index: int) -> np.ndarray:
        return np.asarray(self.values[self.offsets[index] : self.offsets[index + 1]])


def _load(value: Any) -> np.ndarray | Ragged | list[np.ndarray]:
    """An ``arrays`` entry: an array, a ``.npy`` path (memory-mapped), ``{"values", "offsets"}``, or a list."""
    if isinstance(value, str):
        refuse_special(value, "an array file of NumpyDataset")
        try:
            return np.load(value, mmap_mode="r")
        except (OSError, ValueError) as exc:
            raise ConfigError(f"NumpyDataset: cannot memory-map {value!r} as a .npy file: {exc}") from None
    if isinstance(value, dict):
        if set(value) != {"values", "offsets"}:
            raise ConfigError(
                f"NumpyDataset: a dict entry holds variable-length data as {{'values': flat [sum T, ...], "
                f"'offsets': [N + 1]}} (arrays or .npy paths), got keys {sorted(value)}."
            )
        return Ragged(_load(value["values"]), _load(value["offsets"]))
    if isinstance(value, (np.ndarray, Ragged)):
        return value
    return [np.asarray(v) for v in value]


class NumpyDataset(Dataset):
    """Sequences in memory or memory-mapped.

    :param arrays: ``{key: array}`` where an array of shape [N, ...] (or the path of a ``.npy``
        file, memory-mapped) is fixed-shape data, and a list of N arrays [T_i, ...], or
        ``{"values": flat [sum T_i, ...], "offsets": [N + 1]}`` (arrays or ``.npy`` paths, see
        ``Ragged``), is variable-length data (padded in batches, with ``key:seq_len``).
    :param sparse_dims: ``{key: number of classes}`` for integer label keys.
    """

    def __init__(
        self,
        arrays: dict[str, np.ndarray | Sequence[np.ndarray]],
        *,
        sparse_dims: dict[str, int] | None = None,
        **kwargs: Any,
    ):
        super().__init__(**kwargs)
        if not arrays:
            raise ConfigError(f"{self.name}: 'arrays' is empty; give at least one {{key: array}}.")
        self.arrays: dict[str, np.ndarray | Ragged | list[np.ndarray]] = {key: _load(v) for key, v in arrays.items()}
        counts = {key: len(value) for key, value in self.arrays.items()}
        if len(set(counts.values())) != 1:
            raise ConfigError(f"{self.name}: all keys need the same number of sequences, got {counts}.")
        self._num_seqs = next(iter(counts.values()))
        empty_lists = [key for key, value in self.arrays.items() if isinstance(value, list) and not value]
        if empty_lists:  # the shape and dtype of variable-length data are taken from its first sequence
            raise ConfigError(
                f"{self.name}: the lists of {', '.join(map(repr, empty_lists))} are empty: a dataset needs at least "
                f"one sequence, and the shape and dtype of a key are taken from its data. Give the sequences, or "
                f"leave this dataset out of the config."
            )
        self.sparse_dims = dict(sparse_dims or {})
        self._lengths: np.ndarray | None = None

    @property
    def num_seqs(self) -> int:
        return self._num_seqs

    def key_info(self) -> dict[str, dict[str, Any]]:
        info = {}
        for key, value in self.arrays.items():
            if isinstance(value, np.ndarray):
                shape, dtype = tuple(value.shape[1:]), value.dtype
            else:
                first = value[0] if value else np.zeros((0,))
                shape, dtype = (None,) + tuple(first.shape[1:]), first.dtype
            info[key] = {"shape": shape, "dtype": str(dtype), "sparse_dim": self.sparse_dims.get(key)}
        return info

    def get_seq(self, index: int) -> dict[str, np.ndarray]:
        return {key: value[index] for key, value in self.arrays.items()}

    def lengths_of(self, key: str) -> np.ndarray:
        value = self.arrays[key]
        if isinstance(value, Ragged):
            return np.asarray(value.lengths, dtype=np.int64)
        return np.array([np.shape(a)[0] for a in value], dtype=np.int64)

    def seq_lengths(self) -> np.ndarray:
        if self._lengths is None:
            lengths = np.ones(self.num_seqs, dtype=np.int64)
            for value in self.arrays.values():
                if isinstance(value, Ragged):
                    lengths = np.maximum(lengths, value.lengths)
                elif not isinstance(value, np.ndarray):
                    lengths = np.maximum(lengths, [v.shape[0] for v in value])
            self._lengths = lengths
        return self._lengths

    def get_batch(self, indices: np.ndarray) -> dict[str, np.ndarray]:
        batch: dict[str, np.ndarray] = {}
        for key, value in self.arrays.items():
            if isinstance(value, np.ndarray):
                batch[key] = value[indices]
                continue
            batch[key], batch[key + ":seq_len"] = pad_sequences([value[i] for i in indices])
        return batch

    def delivers_stored_values(self) -> bool:
        """Whether every batch holds the stored arrays' values as they are (a subclass's ``get_batch`` may change
        them): then ``find_value_outside`` speaks for every batch."""
        return type(self).get_batch is NumpyDataset.get_batch

    def find_value_outside(self, key: str, low: int, high: int, allow: tuple[int, ...] = ()) -> tuple[int, int] | None:
        """First (sequence index, value) of ``key`` outside [low, high) and not in ``allow``, checking all data at
        once."""
        value = self.arrays[key]
        if isinstance(value, (np.ndarray, Ragged)):  # rows: one per sequence, or one per frame of a Ragged
            rows = value if isinstance(value, np.ndarray) else value.values
            flat = rows.reshape(len(rows), -1) if rows.size else rows.reshape(len(rows), 0)
            bad = ((flat < low) | (flat >= high)) & ~np.isin(flat, allow)
            found = np.flatnonzero(bad.any(axis=1))
            if len(found) == 0:
                return None
            row = int(found[0])
            seq = row if isinstance(value, np.ndarray) else int(np.searchsorted(value.offsets, row, side="right") - 1)
            return seq, int(flat[row][bad[row]][0])
        for seq, arr in enumerate(value):
            bad = ((arr < low) | (arr >= high)) & ~np.isin(arr, allow)
            if bad.any():
                return seq, int(arr[bad].flat[0])
        return None

    def value_counts(self, key: str, num_classes: int) -> np.ndarray:
        """Occurrences of each class id of ``key`` in the whole dataset (ids outside the range not counted)."""
        value = self.arrays[key]
        if isinstance(value, (np.ndarray, Ragged)):
            flat = np.asarray(value if isinstance(value, np.ndarray) else value.values).ravel()
        else:
            flat = np.concatenate([v.ravel() for v in value] or [[]])
        flat = flat.astype(np.int64)
        return np.bincount(flat[(flat >= 0) & (flat < num_classes)], minlength=num_classes)


DATASETS = (NumpyDataset,)
