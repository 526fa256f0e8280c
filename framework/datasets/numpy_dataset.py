"""An in-memory dataset from numpy arrays; the base of the shipped datasets."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from framework.datasets.base import Dataset, pad_sequences
from framework.errors import ConfigError


class NumpyDataset(Dataset):
    """Sequences held in memory.

    :param arrays: ``{key: array}`` where an array of shape [N, ...] is fixed-shape data and a
        list of N arrays [T_i, ...] is variable-length data (padded in batches, with
        ``key:seq_len``).
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
        self.arrays: dict[str, np.ndarray | list[np.ndarray]] = {}
        for key, value in arrays.items():
            self.arrays[key] = value if isinstance(value, np.ndarray) else [np.asarray(v) for v in value]
        counts = {key: len(value) for key, value in self.arrays.items()}
        if len(set(counts.values())) != 1:
            raise ConfigError(f"{self.name}: all keys need the same number of sequences, got {counts}.")
        self._num_seqs = next(iter(counts.values()))
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

    def seq_lengths(self) -> np.ndarray:
        if self._lengths is None:
            lengths = np.ones(self.num_seqs, dtype=np.int64)
            for value in self.arrays.values():
                if not isinstance(value, np.ndarray):
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

    def find_value_outside(self, key: str, low: int, high: int) -> tuple[int, int] | None:
        """First (sequence index, value) of ``key`` outside [low, high), checking all data at once."""
        value = self.arrays[key]
        if isinstance(value, np.ndarray):
            flat = value.reshape(len(value), -1) if value.size else value.reshape(len(value), 0)
            bad = (flat < low) | (flat >= high)
            rows = np.flatnonzero(bad.any(axis=1))
            if len(rows) == 0:
                return None
            seq = int(rows[0])
            return seq, int(flat[seq][bad[seq]][0])
        for seq, arr in enumerate(value):
            bad = (arr < low) | (arr >= high)
            if bad.any():
                return seq, int(arr[bad].flat[0])
        return None

    def value_counts(self, key: str, num_classes: int) -> np.ndarray:
        """Occurrences of each class id of ``key`` in the whole dataset (ids outside the range not counted)."""
        value = self.arrays[key]
        flat = value.ravel() if isinstance(value, np.ndarray) else np.concatenate([v.ravel() for v in value] or [[]])
        flat = flat.astype(np.int64)
        return np.bincount(flat[(flat >= 0) & (flat < num_classes)], minlength=num_classes)
