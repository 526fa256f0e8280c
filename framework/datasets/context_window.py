"""RETURNN's ``window``: each frame of a dataset's ``data`` stacked with its neighbours (a context window).

As RETURNN's ``Dataset._sliding_window`` does it (returnn/datasets/basic.py): an even window grows by one, the
sequence is padded with ``window // 2`` zero frames on both sides, and frame t becomes frames t - window // 2 ..
t + window // 2 one after the other: ``data`` [T, F] becomes [T, window * F] (float32 zeros joined to the data: the
dtype numpy gives float32 with the data's), the lengths stay. RETURNN's datasets differ in what they do with it,
and each of the classes here says which with ``returnn_window`` (see ``Dataset``):

- ``"stacks"``: HDFDataset (its inputs), the GeneratingDataset family with dense inputs (DummyDataset,
  DummyDatasetMultipleSequenceLength, TaskEpisodicCopyDataset, Task12AXDataset, whose one-hot inputs RETURNN gives
  as floats: stacked as one-hot vectors here too);
- ``"ignores"``: RETURNN accepts it and reads the data whole (StaticDataset, and the CachedDataset2 classes
  ConcatDataset, PostprocessingDataset, DistributeFilesDataset, MultiProcDataset, LmDataset, OggZipDataset): their
  sub-datasets' own window applies;
- None: RETURNN stops on it (MetaDataset and CombinedDataset assert window == 1; CopyTaskDataset,
  TaskNumberBaseConvertDataset, DummyDatasetMultipleDataKeys and DummyGenericDataset fail stacking their data), or
  the class is no RETURNN class: refused (``legacy_options``).

The config's ``window`` is every train/dev/eval dataset dict's window unless it sets its own (RETURNN's
``Dataset.kwargs_update_from_config``; its ``eval_datasets`` and a ``forward_data`` dict do not get it).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from framework.base import log
from framework.base.errors import ConfigError
from framework.datasets.base import Dataset

STACKS, STACKS_ONE_HOT, IGNORES = "stacks", "stacks one-hot", "ignores"


def window_size(window: Any, owner: str) -> int:
    """RETURNN's window of a dataset: an int >= 1, an even one grown by one (``Dataset._base_init``)."""
    if not isinstance(window, int) or isinstance(window, bool) or window < 1:
        raise ConfigError(
            f"{owner}: window = {window!r}: give the frames of the context window (an int >= 1; RETURNN asserts "
            f"window > 0). 1 is off."
        )
    return window + 1 if window % 2 == 0 else window


def stack_frames(data: np.ndarray, window: int) -> np.ndarray:
    """RETURNN's ``_sliding_window``: [T, F] -> [T, window * F], zero frames beyond both ends."""
    pad = np.zeros((window // 2, data.shape[1]), dtype=np.float32)
    padded = np.concatenate([pad, data, pad])
    frames = np.lib.stride_tricks.sliding_window_view(padded, (window, data.shape[1]))
    return frames.reshape(data.shape[0], window * data.shape[1])


def with_window(dataset: Dataset, mode: str | None, window: int, owner: str) -> Dataset:
    """``dataset`` as RETURNN gives it with ``window`` (``mode``: its class's ``returnn_window``)."""
    if window == 1:
        return dataset
    if mode == IGNORES:
        log.v3(
            f"{owner}: window = {window}: RETURNN's {type(dataset).__name__} accepts it and reads its data whole "
            f"(it stacks no frames; its sub-datasets' own window applies), and so does it here."
        )
        return dataset
    return ContextWindowDataset(dataset, window, one_hot=mode == STACKS_ONE_HOT, owner=owner)


class ContextWindowDataset(Dataset):
    """``inner`` with each frame of its ``data`` stacked with its neighbours (see the module); every other
    attribute is ``inner``'s."""

    def __init__(self, inner: Dataset, window: int, *, one_hot: bool = False, owner: str = "dataset"):
        # no Dataset.__init__: ordering, epochs and filters are inner's (__getattr__)
        self.__dict__["inner"] = inner
        self.window = window
        info = inner.key_info().get("data")
        sparse = info is not None and info["sparse_dim"] is not None and info["shape"] == (None,)
        if info is None or not (len(info["shape"]) == 2 and info["sparse_dim"] is None or one_hot and sparse):
            raise ConfigError(
                f"{owner}: window = {window}: RETURNN stacks the frames of the dataset's 'data' [T, features], but "
                f"{type(inner).__name__} has {'no data' if info is None else f'data {info}'} (RETURNN fails on it). "
                f"Leave window out."
            )
        self._one_hot = info["sparse_dim"] if sparse else None
        features = self._one_hot or info["shape"][1]
        dtype = np.float32 if self._one_hot else np.result_type(np.float32, np.dtype(info["dtype"]))
        self._data_info = {"shape": (None, window * features), "dtype": np.dtype(dtype).name, "sparse_dim": None}
        self.name = f"{inner.name} (window {window})"

    def __getattr__(self, name: str) -> Any:
        if name == "inner":  # unpickling: no attribute yet
            raise AttributeError(name)
        return getattr(self.inner, name)

    @property
    def seq_ordering(self) -> str | None:
        return self.inner.seq_ordering

    @seq_ordering.setter
    def seq_ordering(self, value: str | None) -> None:
        self.inner.seq_ordering = value

    @property
    def sharded_by_rank(self) -> bool:  # type: ignore[override]
        return self.inner.sharded_by_rank

    @property
    def returnn_sortable(self) -> bool:  # type: ignore[override]
        return self.inner.returnn_sortable

    @property
    def returnn_eval_sorted(self) -> bool:  # type: ignore[override]
        return self.inner.returnn_eval_sorted

    @property
    def num_seqs(self) -> int:
        return self.inner.num_seqs

    def key_info(self) -> dict[str, dict[str, Any]]:
        return {**self.inner.key_info(), "data": dict(self._data_info)}

    def get_seq(self, index: int) -> dict[str, np.ndarray]:
        seq = dict(self.inner.get_seq(index))
        data = seq["data"]
        if self._one_hot is not None:
            data = np.eye(self._one_hot, dtype=np.float32)[data]
        seq["data"] = stack_frames(data, self.window)
        return seq

    def seq_tag(self, index: int) -> str:
        return self.inner.seq_tag(index)

    def use_epoch(self, epoch: int) -> None:
        self.inner.use_epoch(epoch)

    @property
    def returnn_worker_shards(self) -> bool:  # type: ignore[override]
        return self.inner.returnn_worker_shards

    def get_seq_order(self, epoch: int, shard: tuple[int, int] = (0, 1)) -> np.ndarray:
        return self.inner.get_seq_order(epoch, shard)

    def seq_lengths(self) -> np.ndarray:
        return self.inner.seq_lengths()

    def lengths_of(self, key: str) -> np.ndarray:
        return self.inner.lengths_of(key)

    def order_lengths(self) -> np.ndarray:
        return self.inner.order_lengths()

    def sort_lengths(self) -> np.ndarray:
        return self.inner.sort_lengths()

    def filtered(self, order: np.ndarray) -> np.ndarray:
        return self.inner.filtered(order)

    def __repr__(self) -> str:
        return f"ContextWindowDataset({self.inner!r}, window={self.window})"
