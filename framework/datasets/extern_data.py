"""``extern_data``: the declared keys of a batch, and checks that a dataset delivers them."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from framework.datasets.base import Dataset
from framework.errors import ConfigError, DataError

_ENTRY_KEYS = ("shape", "dtype", "sparse_dim", "available_for_inference")


@dataclass(frozen=True)
class DataKey:
    """One batch key: its shape without the batch axis (None = variable length), dtype, classes."""

    name: str
    shape: tuple[int | None, ...]
    dtype: str
    sparse_dim: int | None = None
    available_for_inference: bool = True

    @property
    def variable(self) -> bool:
        """Whether the key has a variable-length axis (and so a ``key:seq_len`` companion)."""
        return None in self.shape


def parse_extern_data(spec: dict[str, Any]) -> dict[str, DataKey]:
    """Validate the ``extern_data`` option."""
    keys = {}
    for name, entry in spec.items():
        where = f"extern_data[{name!r}]"
        if not isinstance(entry, dict):
            raise ConfigError(f"{where} must be a dict like {{'shape': (784,), 'dtype': 'float32'}}, got {entry!r}.")
        unknown = [k for k in entry if k not in _ENTRY_KEYS]
        if unknown:
            raise ConfigError(f"{where} has unknown entries {unknown}; allowed are {', '.join(_ENTRY_KEYS)}.")
        if "shape" not in entry:
            raise ConfigError(f"{where} needs a 'shape' (without the batch axis; None for a variable-length axis).")
        shape = entry["shape"]
        if not isinstance(shape, (tuple, list)) or not all(d is None or (isinstance(d, int) and d > 0) for d in shape):
            raise ConfigError(f"{where}['shape'] must be a tuple of positive ints or None, got {shape!r}.")
        sparse_dim = entry.get("sparse_dim")
        dtype = entry.get("dtype", "int64" if sparse_dim is not None else "float32")
        try:
            np_dtype = np.dtype(dtype)
        except TypeError:
            raise ConfigError(f"{where}['dtype'] {dtype!r} is not a dtype name such as 'float32' or 'int64'.") from None
        if sparse_dim is not None and (not isinstance(sparse_dim, int) or sparse_dim < 1 or np_dtype.kind not in "iu"):
            raise ConfigError(
                f"{where}: sparse_dim must be a positive int on an integer dtype, got {sparse_dim!r} "
                f"with dtype {dtype!r}."
            )
        keys[name] = DataKey(
            name, tuple(shape), str(np_dtype), sparse_dim, bool(entry.get("available_for_inference", True))
        )
    return keys


def extern_data_from_dataset(dataset: Dataset) -> dict[str, DataKey]:
    """``extern_data`` as the dataset describes its own keys (when the config gives none)."""
    return parse_extern_data(
        {k: {key: v for key, v in info.items() if v is not None} for k, info in dataset.key_info().items()}
    )


def check_dataset(extern_data: dict[str, DataKey], dataset: Dataset, option: str) -> None:
    """Raise DataError when ``dataset`` does not deliver what ``extern_data`` declares.

    In-memory datasets are scanned completely for labels outside ``sparse_dim``, so that bad
    labels are reported before the first training step.
    """
    info = dataset.key_info()
    where = f"dataset {option!r} ({dataset.name})"
    for key, declared in extern_data.items():
        if key not in info:
            raise DataError(
                f"extern_data declares {key!r}, but {where} has no such key; it has "
                f"{', '.join(info)}. Rename the key in extern_data or in the dataset."
            )
        have = tuple(info[key]["shape"])
        if len(have) != len(declared.shape) or any(
            (a is None) != (b is None) or (a is not None and a != b) for a, b in zip(have, declared.shape, strict=True)
        ):
            raise DataError(
                f"extern_data[{key!r}] declares shape {declared.shape}, but {where} delivers {have} "
                f"(without batch axis; None = variable length). Fix the declared shape."
            )
        have_sparse = info[key].get("sparse_dim")
        if declared.sparse_dim is not None and have_sparse is not None and have_sparse != declared.sparse_dim:
            raise DataError(
                f"extern_data[{key!r}] declares sparse_dim {declared.sparse_dim}, but {where} has "
                f"{have_sparse} classes."
            )
        if declared.sparse_dim is not None and hasattr(dataset, "find_value_outside"):
            found = dataset.find_value_outside(key, 0, declared.sparse_dim)
            if found is not None:
                raise DataError(label_error(key, found[1], found[0], declared.sparse_dim, where))


def label_error(key: str, value: int, seq_index: int, sparse_dim: int, where: str) -> str:
    """The message for a label outside ``[0, sparse_dim)``."""
    return (
        f"{where}: key {key!r} has the value {value} at sequence index {seq_index}, outside [0, {sparse_dim}) "
        f"declared by extern_data[{key!r}]['sparse_dim']. Fix the labels or the sparse_dim."
    )
