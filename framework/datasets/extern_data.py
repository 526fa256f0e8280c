"""``extern_data``: the declared keys of a batch, and checks that a dataset delivers them.

Two notations are understood. Ours: ``{"shape": (None, 40), "dtype": "float32", "sparse_dim": K}``.
RETURNN's: ``{"dim": 40}`` (dense, shape ``(None, 40)``), ``{"dim": K, "sparse": True}`` (class
ids, shape ``(None,)``, int32), with ``shape``/``dtype`` optional as in RETURNN, and RETURNN's ``Dim``
objects (``{"dims": [batch_dim, time_dim, in_dim], "sparse_dim": out_dim}``, also as ``dim_tags``):
the dimensions are read from them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from framework.base.errors import ConfigError, DataError
from framework.datasets.base import Dataset

# The field's markers for "no label here", which a loss skips with its ignore_index: torch's default -100 (Hugging
# Face's collators pad labels with it), -1, and 255 (the void label of VOC- and Cityscapes-style segmentation). A
# sparse key may hold them besides its class ids; the first step checks that the loss really ignores them.
VOID_LABELS = (-100, -1, 255)

_ENTRY_KEYS = ("shape", "dtype", "sparse_dim", "available_for_inference", "dim", "sparse", "vocab")
# RETURNN entries that describe its Tensor API's axes; here a batch entry is a plain tensor
# [batch, *shape], so they have no counterpart.
_RETURNN_AXIS_KEYS = ("dims", "dim_tags", "batch_dim_axis", "time_dim_axis", "feature_dim_axis", "same_dim_tags_as")


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


def parse_extern_data(spec: dict[str, Any], option: str = "extern_data") -> dict[str, DataKey]:
    """Validate the ``extern_data`` option, or ``model_outputs`` (our notation or RETURNN's)."""
    keys = {}
    for name, entry in spec.items():
        where = f"{option}[{name!r}]"
        if not isinstance(entry, dict):
            raise ConfigError(f"{where} must be a dict like {{'shape': (784,), 'dtype': 'float32'}}, got {entry!r}.")
        entry = _from_returnn_dims(entry)
        axis_keys = [k for k in entry if k in _RETURNN_AXIS_KEYS]
        if axis_keys:
            raise ConfigError(
                f"{where} uses {axis_keys}, RETURNN's Tensor-API axis descriptions, which have no meaning here: a batch "
                f"entry is a plain tensor [batch, *shape] (variable axes padded, lengths in {name + ':seq_len'!r}). "
                f"Write 'shape' (without the batch axis, None for a variable-length axis) and 'dim' or 'sparse_dim'."
            )
        unknown = [k for k in entry if k not in _ENTRY_KEYS]
        if unknown:
            raise ConfigError(f"{where} has unknown entries {unknown}; allowed are {', '.join(_ENTRY_KEYS)}.")
        shape, sparse_dim, dtype = _normalized_entry(entry, where)
        if not isinstance(shape, (tuple, list)) or not all(d is None or (isinstance(d, int) and d > 0) for d in shape):
            raise ConfigError(f"{where}['shape'] must be a tuple of positive ints or None, got {shape!r}.")
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


def _is_dim(value: Any) -> bool:
    """Whether ``value`` is a RETURNN ``Dim`` (``returnn.tensor.Dim``; told by its attributes, RETURNN is optional)."""
    return hasattr(value, "dimension") and callable(getattr(value, "is_batch_dim", None))


def _from_returnn_dims(entry: dict[str, Any]) -> dict[str, Any]:
    """An entry with RETURNN ``Dim`` objects (``dims`` / ``dim_tags``, ``sparse_dim``) in the shape notation: the batch
    dim dropped, a dynamic dim (``dimension`` None) a variable-length axis; sparse ids default to int32 as there."""
    axes_key = next((k for k in ("dims", "dim_tags") if k in entry), None)
    axes = entry.get(axes_key) if axes_key else None
    sparse_dim = entry.get("sparse_dim")
    dims_given = isinstance(axes, (list, tuple)) and axes and all(_is_dim(d) for d in axes)
    if not dims_given and not _is_dim(sparse_dim):
        return entry
    converted = {k: v for k, v in entry.items() if k != axes_key}
    if dims_given:
        converted["shape"] = tuple(d.dimension for d in axes if not d.is_batch_dim())
    if _is_dim(sparse_dim):
        converted["sparse_dim"] = sparse_dim.dimension
        converted.setdefault("dtype", "int32")
    return converted


def _normalized_entry(entry: dict[str, Any], where: str) -> tuple[Any, int | None, Any]:
    """(shape, sparse_dim, dtype) of an entry in either notation, with RETURNN's defaults for its notation:
    no shape means a variable-length axis (plus the feature axis ``dim`` when dense); sparse ids are int32."""
    dim, sparse = entry.get("dim"), entry.get("sparse", False)
    if not isinstance(sparse, bool):
        raise ConfigError(f"{where}['sparse'] must be True or False, got {sparse!r}.")
    if dim is not None and (not isinstance(dim, int) or isinstance(dim, bool) or dim < 1):
        raise ConfigError(f"{where}['dim'] must be a positive int, got {dim!r}.")
    sparse_dim = entry.get("sparse_dim")
    if sparse:
        if dim is None and sparse_dim is None:
            raise ConfigError(f"{where}: 'sparse': True needs 'dim', the number of classes.")
        if dim is not None and sparse_dim is not None and dim != sparse_dim:
            raise ConfigError(f"{where}: 'dim' {dim} and 'sparse_dim' {sparse_dim} disagree; give one of them.")
        sparse_dim = sparse_dim if sparse_dim is not None else dim
    if "shape" in entry:
        shape = entry["shape"]
        if dim is not None and not sparse and isinstance(shape, (tuple, list)) and (not shape or shape[-1] != dim):
            raise ConfigError(f"{where}: 'dim' {dim} must be the last axis of 'shape' {tuple(shape)} (RETURNN's rule).")
    elif dim is not None or sparse:
        shape = (None,) if sparse else (None, dim)
    else:
        raise ConfigError(
            f"{where} needs a 'shape' (without the batch axis; None for a variable-length axis), or RETURNN's "
            f"'dim' (and 'sparse': True for class ids)."
        )
    default_dtype = "int32" if sparse else "int64" if sparse_dim is not None else "float32"
    return shape, sparse_dim, entry.get("dtype", default_dtype)


def extern_data_from_dataset(dataset: Dataset) -> dict[str, DataKey]:
    """``extern_data`` as the dataset describes its own keys (when the config gives none)."""
    return parse_extern_data(
        {k: {key: v for key, v in info.items() if v is not None} for k, info in dataset.key_info().items()}
    )


def check_dataset(extern_data: dict[str, DataKey], dataset: Dataset, option: str) -> set[str]:
    """Raise DataError when ``dataset`` does not deliver what ``extern_data`` declares.

    In-memory datasets are scanned completely for labels outside ``sparse_dim``, so that bad
    labels are reported before the first training step. Returns the keys whose every batch that
    scan covers (the loader need not check their labels again).
    """
    info = dataset.key_info()
    scanned = set()
    one_hot = one_hot_keys(extern_data, info)
    where = f"dataset {option!r} ({dataset.name})"
    for key, declared in extern_data.items():
        if key not in info:
            raise DataError(
                f"extern_data declares {key!r}, but {where} has no such key; it has "
                f"{', '.join(info)}. Rename the key in extern_data or in the dataset."
            )
        have = tuple(info[key]["shape"])
        if key in one_hot:
            continue
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
            found = dataset.find_value_outside(key, 0, declared.sparse_dim, allow=VOID_LABELS)
            if found is not None:
                raise DataError(label_error(key, found[1], found[0], declared.sparse_dim, where))
            if getattr(dataset, "delivers_stored_values", lambda: False)():
                scanned.add(key)
    return scanned


def bad_labels(values: np.ndarray, sparse_dim: int) -> np.ndarray:
    """Where ``values`` are neither a class id in ``[0, sparse_dim)`` nor one of ``VOID_LABELS``."""
    return ((values < 0) | (values >= sparse_dim)) & ~np.isin(values, VOID_LABELS)


def label_error(key: str, value: int, seq_index: int, sparse_dim: int, where: str) -> str:
    """The message for a label outside ``[0, sparse_dim)``."""
    return (
        f"{where}: key {key!r} has the value {value} at sequence index {seq_index}, outside [0, {sparse_dim}) "
        f"declared by extern_data[{key!r}]['sparse_dim'] (and not a void label a loss can ignore: "
        f"{', '.join(map(str, VOID_LABELS))}). Fix the labels or the sparse_dim."
    )


def one_hot_keys(extern_data: dict[str, DataKey], key_info: dict[str, dict[str, Any]]) -> dict[str, int]:
    """Keys the dataset delivers as class ids [..] but ``extern_data`` declares dense [.., K]: ``{key: K}``.

    RETURNN's generated datasets (Task12AX, ...) deliver one-hot vectors where ours deliver ids, so a
    RETURNN config declares them dense (``{"dim": 9}``); the loader turns the ids into one-hot vectors.
    """
    found = {}
    for key, declared in extern_data.items():
        info = key_info.get(key)
        classes = None if info is None else info.get("sparse_dim")
        if classes is None or declared.sparse_dim is not None or np.dtype(declared.dtype).kind != "f":
            continue
        if declared.shape == tuple(info["shape"]) + (classes,):
            found[key] = classes
    return found
