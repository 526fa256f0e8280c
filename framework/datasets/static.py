"""RETURNN's ``StaticDataset``: sequences given in the config, a list of ``{key: array}``.

Every array is a sequence along its first axis. The tags are RETURNN's (``seq-<index>``), and a "sorted" ordering
sorts by the length of the first key as RETURNN orders the keys (``data`` first, then the others by name).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from framework.base.errors import ConfigError
from framework.datasets.numpy_dataset import NumpyDataset


class StaticDataset(NumpyDataset):
    """Sequences from a list of dicts.

    :param data: one ``{key: array [T, ...]}`` per sequence, every sequence with the same keys.
    :param output_dim: RETURNN's ``{key: (dim, ndim)}``: a key with ``ndim`` 1 and integer values is class ids
        with ``dim`` classes. Keys it leaves out are dense (or ids without a known number of classes).
    :param target_list: RETURNN's list of target keys (checked to be keys of the data; every key is a batch key).
    :param input_dim: RETURNN's feature dimension of ``data`` (checked).
    """

    returnn_window = "ignores"  # what RETURNN's class does with window (context_window.py)
    returnn_sortable = True  # RETURNN's class supports_seq_order_sorting: its forward run sorts it

    def __init__(
        self,
        data: list[dict[str, Any]],
        target_list: list[str] | None = None,
        input_dim: int | None = None,
        output_dim: dict[str, Any] | None = None,
        **kwargs: Any,
    ):
        if not isinstance(data, (list, tuple)) or not data or not all(isinstance(seq, dict) for seq in data):
            raise ConfigError("StaticDataset: data must be a non-empty list of {key: array} dicts, one per sequence.")
        keys = sorted(data[0])
        self.first_key = "data" if "data" in keys else keys[0]  # what RETURNN sorts by
        arrays: dict[str, list[np.ndarray]] = {key: [] for key in keys}
        for index, seq in enumerate(data):
            if sorted(seq) != keys:
                raise ConfigError(f"StaticDataset: sequence {index} has the keys {sorted(seq)}, sequence 0 has {keys}.")
            for key in keys:
                array = np.asarray(seq[key])
                if array.ndim == 0:
                    raise ConfigError(
                        f"StaticDataset: data[{index}][{key!r}] is a scalar; every value is a sequence along its first "
                        f"axis (write [value] for a sequence of one frame)."
                    )
                arrays[key].append(array)
        unknown = [key for key in (target_list or []) if key not in keys]
        if unknown:
            raise ConfigError(f"StaticDataset: target_list names {unknown}, which the data does not have ({keys}).")
        if input_dim is not None and "data" in keys and arrays["data"][0].ndim >= 2:
            if arrays["data"][0].shape[-1] != input_dim:
                raise ConfigError(
                    f"StaticDataset: input_dim = {input_dim}, but data's frames have {arrays['data'][0].shape[-1]}."
                )
        super().__init__(arrays, sparse_dims=_sparse_dims(output_dim, arrays), **kwargs)
        self.name = f"StaticDataset({len(data)} seqs)"

    def order_lengths(self) -> np.ndarray:
        return self.lengths_of(self.first_key)


def _sparse_dims(output_dim: Any, arrays: dict[str, list[np.ndarray]]) -> dict[str, int]:
    if output_dim is None:
        return {}
    if not isinstance(output_dim, dict):
        raise ConfigError(f"StaticDataset: output_dim must be RETURNN's dict {{key: (dim, ndim)}}, got {output_dim!r}.")
    sparse = {}
    for key, value in output_dim.items():
        if key not in arrays:
            raise ConfigError(f"StaticDataset: output_dim names {key!r}, which the data does not have.")
        dim, ndim = (value, 1) if isinstance(value, int) else tuple(value)[:2]
        first = arrays[key][0]
        if ndim == 1 and first.ndim == 1 and first.dtype.kind in "iu":
            sparse[key] = int(dim)
    return sparse


DATASETS = (StaticDataset,)
