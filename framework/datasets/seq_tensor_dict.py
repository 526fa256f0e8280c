"""The tensor dicts a ``PostprocessingDataset``'s functions get: RETURNN's ``TensorDict`` and ``Tensor`` as those
functions use them (``data.data[key].raw_tensor``, ``data[key]``, ``copy_template``), without RETURNN.

A function may also put RETURNN's own ``Tensor`` objects in (a config that imports RETURNN): anything with a
``raw_tensor`` is read.
"""

from __future__ import annotations

from typing import Any

import numpy as np


class SeqTensor:
    """One entry of a ``SeqTensorDict``: RETURNN's ``Tensor`` as a postprocessing function uses it."""

    def __init__(self, name: str, raw_tensor: Any, dtype: str | None = None, sparse_dim: int | None = None):
        self.name, self.raw_tensor, self.sparse_dim = name, raw_tensor, sparse_dim
        self.dtype = dtype if dtype is not None else str(np.asarray(raw_tensor).dtype)

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(np.shape(self.raw_tensor))

    @property
    def ndim(self) -> int:
        return len(self.shape)

    def copy(self) -> SeqTensor:
        return SeqTensor(self.name, np.copy(self.raw_tensor), self.dtype, self.sparse_dim)

    def copy_template(self) -> SeqTensor:
        return SeqTensor(self.name, None, self.dtype, self.sparse_dim)

    def __repr__(self) -> str:
        return f"SeqTensor({self.name!r}, shape={self.shape}, dtype={self.dtype})"


class SeqTensorDict:
    """RETURNN's ``TensorDict`` as postprocessing functions use it: ``.data`` maps keys to tensors."""

    def __init__(self, data: dict[str, SeqTensor] | None = None):
        self.data: dict[str, Any] = dict(data or {})

    def __getitem__(self, key: str) -> Any:
        return self.data[key]

    def __contains__(self, key: str) -> bool:
        return key in self.data

    def update(self, data: Any, *, auto_convert: bool = False) -> None:
        items = data.data.items() if hasattr(data, "data") else dict(data).items()
        for key, value in items:
            self.data[key] = value if hasattr(value, "raw_tensor") else SeqTensor(key, value)

    def copy_template(self) -> SeqTensorDict:
        return SeqTensorDict({key: tensor.copy_template() for key, tensor in self.data.items()})

    def __repr__(self) -> str:
        return f"SeqTensorDict({list(self.data.values())})"
