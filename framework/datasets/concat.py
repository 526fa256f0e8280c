"""RETURNN's ``ConcatDataset``: the sequences of several datasets, one dataset after the other."""

from __future__ import annotations

from typing import Any

import numpy as np

from framework.base.errors import ConfigError
from framework.datasets.base import Dataset
from framework.datasets.registry import init_dataset


class ConcatDataset(Dataset):
    """The sequences of ``datasets`` one after the other, e.g. the ``.npy`` shards of one sub-epoch of a
    ``DistributeFilesDataset``.

    :param datasets: dataset dicts (or ``Dataset`` instances) with the same keys; sequence 0 of the second
        follows the last of the first. With ``seq_ordering`` "default" (RETURNN's only one), each dataset's epoch
        in its own order (its ``seq_ordering`` and ``partition_epoch``), one after the other, as RETURNN does;
        another ``seq_ordering`` (here only) orders the concatenation itself and the parts' own orders are not used.
    """

    returnn_window = "ignores"  # what RETURNN's class does with window (context_window.py)
    returnn_eval_sorted = False  # RETURNN stops on a dev/eval "sorted" (its only order here: the default)

    def __init__(self, datasets: list[Any], **kwargs: Any):
        super().__init__(**kwargs)
        if not datasets:
            raise ConfigError("ConcatDataset: 'datasets' is empty; give at least one dataset dict.")
        self.datasets = [
            init_dataset(spec, option=f"ConcatDataset datasets[{i}]", random_seed=self.random_seed, parent=self)
            for i, spec in enumerate(datasets)
        ]
        info = self.datasets[0].key_info()
        for i, dataset in enumerate(self.datasets[1:], start=1):
            if dataset.key_info() != info:
                raise ConfigError(
                    f"ConcatDataset: datasets[{i}] ({dataset.name}) holds {dataset.key_info()}, but datasets[0] "
                    f"({self.datasets[0].name}) holds {info}; concatenated datasets need the same keys, shapes and "
                    f"dtypes."
                )
        self._starts = np.cumsum([0] + [dataset.num_seqs for dataset in self.datasets])
        self.name = f"ConcatDataset({', '.join(dataset.name for dataset in self.datasets)})"

    @property
    def num_seqs(self) -> int:
        return int(self._starts[-1])

    def key_info(self) -> dict[str, dict[str, Any]]:
        return self.datasets[0].key_info()

    def _locate(self, index: int) -> tuple[int, int]:
        part = int(np.searchsorted(self._starts, index, side="right")) - 1
        return part, index - int(self._starts[part])

    def get_seq(self, index: int) -> dict[str, np.ndarray]:
        part, local = self._locate(index)
        return self.datasets[part].get_seq(local)

    def seq_tag(self, index: int) -> str:
        part, local = self._locate(index)
        return self.datasets[part].seq_tag(local)

    def get_seq_order(self, epoch: int) -> np.ndarray:
        if (self.seq_ordering or "default") != "default":
            return super().get_seq_order(epoch)
        parts = [self._starts[i] + dataset.get_seq_order(epoch) for i, dataset in enumerate(self.datasets)]
        return self.filtered(np.concatenate(parts).astype(np.int64))

    def use_epoch(self, epoch: int) -> None:
        for dataset in self.datasets:
            dataset.use_epoch(epoch)

    def lengths_of(self, key: str) -> np.ndarray:
        return np.concatenate([dataset.lengths_of(key) for dataset in self.datasets]).astype(np.int64)

    def seq_lengths(self) -> np.ndarray:
        return np.concatenate([dataset.seq_lengths() for dataset in self.datasets]).astype(np.int64)


DATASETS = (ConcatDataset,)
