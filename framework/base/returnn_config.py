"""RETURNN's ``Config`` interface over this run's config, for the code a RETURNN config calls into.

A ``dynamic_learning_rate`` function or model code written for RETURNN reads its settings with
``from returnn.config import get_global_config; get_global_config().float_list("learning_rate_piecewise_values")``.
``install`` makes that call return a ``ReturnnConfigView`` of the running config: through RETURNN's own
``set_global_config`` where RETURNN is installed, else through a minimal ``returnn.config`` module that holds only
``get_global_config``. Each method has the meaning of RETURNN's (returnn/config.py) for values set in a Python config
(RETURNN's "typed" values; a Python config has no others).
"""

from __future__ import annotations

import builtins
import importlib.util
import sys
import types
from collections import ChainMap
from typing import Any


class ReturnnConfigView:
    """A running config as RETURNN's ``Config``: ``typed_dict`` and the typed readers, over the config's values
    (a plugin mode's, then the overrides, then the files'), live: a later override is seen."""

    def __init__(self, config: Any):
        self._config = config
        self.dict: dict[str, list[str]] = {}  # RETURNN's untyped (command-line string) values: none here

    @property
    def typed_dict(self) -> ChainMap:
        """Every value of the config, by name (RETURNN's ``Config.typed_dict``)."""
        return ChainMap(self._config.derived, self._config.overrides, self._config.namespace)

    def has(self, key: str) -> bool:
        """Whether the config sets ``key``."""
        return key in self.typed_dict

    def is_typed(self, key: str) -> bool:
        """Whether ``key`` has a (typed) value."""
        return key in self.typed_dict

    def is_true(self, key: str, default: bool = False) -> bool:
        """``bool`` of the value, else ``default``."""
        return bool(self.typed_dict[key]) if key in self.typed_dict else default

    def is_of_type(self, key: str, types: type | tuple[type, ...]) -> bool:
        """Whether ``key`` is set to an instance of ``types``."""
        return key in self.typed_dict and isinstance(self.typed_dict[key], types)

    def get_of_type(self, key: str, types: type | tuple[type, ...], default: Any = None) -> Any:
        """The value if it is an instance of ``types``, else ``default``."""
        return self.typed_dict[key] if self.is_of_type(key, types) else default

    def set(self, key: str, value: Any) -> None:
        """Set ``key`` for the rest of the run (RETURNN's ``Config.set``), as an override would."""
        self._config.overrides[key] = value

    def update(self, values: dict[str, Any]) -> None:
        """``set`` each item."""
        for key, value in values.items():
            self.set(key, value)

    def value(self, key: str, default: Any, index: int | None = None, list_join_str: str = ",") -> Any:
        """The value as a string (a list joined by ``list_join_str``); ``default`` if unset or None."""
        if key not in self.typed_dict:
            return default
        value = self.typed_dict[key]
        if index is not None:
            return str(value[index])
        if isinstance(value, (list, tuple)):
            return list_join_str.join(str(v) for v in value)
        return default if value is None else str(value)

    def typed_value(self, key: str, default: Any = None, index: int | None = None) -> Any:
        """The value itself (its ``index``-th item for a list), else ``default``."""
        value = self.typed_dict.get(key, default)
        if index is not None:
            if isinstance(value, (list, tuple)):
                return value[index]
            assert index == 0, f"config {key!r}: index {index} of a value that is no list"
        return value

    def opt_typed_value(self, key: str, default: Any = None) -> Any:
        """The value itself, else ``default``."""
        return self.typed_dict[key] if key in self.typed_dict else default

    def int(self, key: str, default: Any, index: int = 0) -> Any:
        """The value, which must be an int (or None), else ``default``."""
        if key not in self.typed_dict:
            return default
        value = self.typed_value(key, default, index)
        if value is not None and not isinstance(value, builtins.int):
            raise TypeError(f"config {key!r} = {value!r}: RETURNN's config.int expects an int")
        return value

    def bool(self, key: str, default: Any, index: int = 0) -> Any:
        """The value, which must be a bool or int (given as bool), else ``default``."""
        if key not in self.typed_dict:
            return default
        value = self.typed_value(key, default, index)
        if isinstance(value, builtins.int):
            value = builtins.bool(value)
        if value is not None and not isinstance(value, builtins.bool):
            raise TypeError(f"config {key!r} = {value!r}: RETURNN's config.bool expects a bool")
        return value

    def bool_or_other(self, key: str, default: Any = None, index: int = 0) -> Any:
        """The value itself, else ``default``."""
        return self.typed_value(key, default, index) if key in self.typed_dict else default

    def float(self, key: str, default: Any, index: int = 0) -> Any:
        """The value as a float (a string such as "inf" is parsed), else ``default``."""
        value = self.typed_value(key, default, index) if key in self.typed_dict else default
        if isinstance(value, str):
            value = builtins.float(value)
        if value is not None and not isinstance(value, (builtins.int, builtins.float)):
            raise TypeError(f"config {key!r} = {value!r}: RETURNN's config.float expects a number")
        return value

    def list(self, key: str, default: Any = None) -> Any:
        """The value as a list (a single value becomes a list of one), else ``default`` ([] if None)."""
        default = [] if default is None else default
        if key not in self.typed_dict or self.typed_dict[key] is None:
            return default
        value = self.typed_dict[key]
        return builtins.list(value) if isinstance(value, (tuple, builtins.list)) else [value]

    def int_list(self, key: str, default: Any = None) -> Any:
        """``list``, each item an int."""
        return self._checked_list(key, default, (builtins.int,))

    def float_list(self, key: str, default: Any = None) -> Any:
        """``list``, each item an int or float."""
        return self._checked_list(key, default, (builtins.int, builtins.float))

    def _checked_list(self, key: str, default: Any, item_types: tuple[type, ...]) -> Any:
        values = self.list(key, default)
        if key in self.typed_dict and any(not isinstance(v, item_types) for v in values):
            raise TypeError(f"config {key!r} = {values!r}: items of type {item_types} expected")
        return values

    def int_pair(self, key: str, default: tuple[int, int] | None = None) -> tuple[int, int]:
        """The value as a pair of ints (one int x gives (x, x)), else ``default`` ((0, 0) if None)."""
        if key not in self.typed_dict:
            return (0, 0) if default is None else default
        value = self.typed_dict[key]
        pair = tuple(value) if isinstance(value, (tuple, builtins.list)) else (value, value)
        if len(pair) != 2 or any(not isinstance(v, builtins.int) for v in pair):
            raise TypeError(f"config {key!r} = {value!r}: a pair of ints expected")
        return pair


def install(config: Any) -> ReturnnConfigView:
    """Make ``returnn.config.get_global_config()`` return a view of ``config`` for the rest of the process."""
    view = ReturnnConfigView(config)
    if not _returnn_importable():
        sys.modules.update(_stand_in_modules())
    module = sys.modules.get("returnn.config") or importlib.import_module("returnn.config")
    module.set_global_config(view)
    return view


def _returnn_importable() -> bool:
    if "returnn" in sys.modules:  # imported (or, as None, made unimportable)
        return sys.modules["returnn"] is not None
    return importlib.util.find_spec("returnn") is not None


def _stand_in_modules() -> dict[str, types.ModuleType]:
    """A ``returnn`` package with only ``returnn.config`` (get_global_config, set_global_config), for where RETURNN
    is not installed: a config's ``from returnn.config import get_global_config`` works, any other RETURNN import
    fails as it would without RETURNN."""
    package = types.ModuleType("returnn", "Not RETURNN: only returnn.config.get_global_config (framework).")
    package.__path__ = []  # a package whose submodules other than config cannot be found
    module = types.ModuleType("returnn.config", "RETURNN's get_global_config over this run's config (framework).")
    holder: dict[str, Any] = {}

    def set_global_config(config: Any) -> None:
        holder["config"] = config

    def get_global_config(*, raise_exception: bool = True, auto_create: bool = False, **_kwargs: Any) -> Any:
        if "config" not in holder and raise_exception and not auto_create:
            raise RuntimeError("No global config found.")
        return holder.get("config")

    module.set_global_config, module.get_global_config = set_global_config, get_global_config
    package.config = module
    return {"returnn": package, "returnn.config": module}
