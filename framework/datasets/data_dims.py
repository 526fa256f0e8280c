"""RETURNN's ``data_dims`` of the combining datasets: ``{key: (dim, ndim)}``, a check of what the data holds.

RETURNN reads the dims from the datasets and calls the option deprecated; configs still carry it. Here it is
checked against the keys' classes (ids) or feature dims, so a stale value is said rather than ignored.
"""

from __future__ import annotations

from typing import Any

from framework.base.errors import ConfigError


def check_data_dims(owner: str, info: dict[str, dict[str, Any]], data_dims: Any) -> None:
    """ConfigError where ``data_dims`` names a key ``info`` lacks, or a dim other than the data's."""
    if data_dims is None:
        return
    if not isinstance(data_dims, dict):
        raise ConfigError(f"{owner}: data_dims must be RETURNN's dict {{key: (dim, ndim)}}, got {data_dims!r}.")
    for key, value in data_dims.items():
        if key not in info:
            raise ConfigError(f"{owner}: data_dims names {key!r}, which is not one of its keys {sorted(info)}.")
        dim = value if isinstance(value, int) else tuple(value)[0]
        shape = info[key]["shape"]
        known = info[key]["sparse_dim"] or (shape[-1] if shape and shape[-1] is not None else 1)
        if dim != known:
            raise ConfigError(
                f"{owner}: data_dims[{key!r}] = {value!r}, but the data has dim {known}. Correct data_dims, or leave "
                f"it out (RETURNN reads the dims from the datasets)."
            )
