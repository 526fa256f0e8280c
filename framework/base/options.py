"""The option registry: the single source of truth for every config option.

Each option is declared once, with its name, type, default, a one-line doc, the component that
reads it and optionally choices, a range and what ``True`` means, by a top-level ``register(...)`` in
the module that reads it (``framework.base.declarations`` finds those modules; their declarations are read
from the source without importing them). The registry validates configs, prints ``rnn.py --help-options``
and generates ``docs/options.rst``; validation and help work before torch is loaded.

Types are written as a small union language, e.g. ``"int"``, ``"float | None"``,
``"str | list[str] | None"``, ``"dict | callable"``. ``float`` accepts ints; ``int`` rejects
bools; ``list`` accepts tuples; ``any`` accepts everything (the component validates further).
"""

from __future__ import annotations

import ast
import difflib
import importlib
import importlib.util
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from framework.base import declarations


@dataclass(frozen=True)
class Option:
    """One registered config option."""

    name: str
    type: str
    default: Any
    doc: str
    component: str
    choices: tuple[Any, ...] | None = None
    range: str | None = None  # an interval such as "[1, inf)" or "(0, 1]"; lists: each element, dicts: each value
    true_means: Any = None  # for "bool | int" options: the number that True stands for

    def check(self, value: Any) -> str | None:
        """Return None when ``value`` fits this option, else a sentence saying what is wrong."""
        if not type_matches(self.type, value):
            return f"option {self.name!r} expects {self.type}, but got {_describe(value)}"
        if self.choices is not None and value not in self.choices:
            allowed = ", ".join(repr(c) for c in self.choices)
            return f"option {self.name!r} ({self.doc.rstrip('.')}) must be one of {allowed}, but got {value!r}"
        numbers = (
            list(value.values()) if isinstance(value, dict) else value if isinstance(value, (list, tuple)) else [value]
        )
        for number in numbers:
            if not _is_number(number):
                continue
            if number != number:
                return f"option {self.name!r} is NaN; give a number"
            if self.range is not None and not in_interval(self.range, number):
                where = (
                    ""
                    if number is value
                    else f" ({'a value' if isinstance(value, dict) else 'element'} {number!r} of {value!r})"
                )
                return (
                    f"option {self.name!r} ({self.doc.rstrip('.')}) must be in {self.range}, but got {number!r}{where}"
                )
        return None


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


_INTERVAL = re.compile(r"^([\[(])\s*(-inf|[-+0-9.e]+)\s*,\s*(inf|[-+0-9.e]+)\s*([\])])$")


def parse_interval(text: str) -> tuple[float, bool, float, bool]:
    """``"[1, inf)"`` -> (low, low included, high, high included); ValueError if malformed."""
    match = _INTERVAL.match(text) if isinstance(text, str) else None
    if match is None:
        raise ValueError(f"range {text!r} is not an interval such as '[1, inf)' or '(0, 1]'")
    opening, low, high, closing = match.groups()
    return float(low), opening == "[", float(high), closing == "]"


def in_interval(text: str, value: float) -> bool:
    """Whether ``value`` lies in the interval ``text`` (e.g. ``"(0, 1]"``)."""
    low, low_closed, high, high_closed = parse_interval(text)
    above = value >= low if low_closed else value > low
    below = value <= high if high_closed else value < high
    return above and below


def _describe(value: Any) -> str:
    text = repr(value)
    if len(text) > 80:
        text = text[:77] + "..."
    return f"{type(value).__name__} {text}"


def _atom_matches(atom: str, value: Any) -> bool:
    if atom == "any":
        return True
    if atom == "None":
        return value is None
    if atom == "bool":
        return isinstance(value, bool)
    if atom == "int":
        return isinstance(value, int) and not isinstance(value, bool)
    if atom == "float":
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if atom == "str":
        return isinstance(value, str)
    if atom == "dict":
        return isinstance(value, dict)
    if atom == "callable":
        return callable(value)
    if atom.startswith("list"):
        if not isinstance(value, (list, tuple)):
            return False
        if atom == "list":
            return True
        inner = atom[len("list[") : -1]
        return all(_atom_matches(inner, v) for v in value)
    raise ValueError(f"unknown type atom {atom!r} in the option registry")


def type_matches(type_spec: str, value: Any) -> bool:
    """Whether ``value`` matches a union type spec such as ``"int | None"``."""
    return any(_atom_matches(atom.strip(), value) for atom in type_spec.split("|"))


_REGISTRY: dict[str, Option] = {}
_plugins_read = False


def register(
    name: str,
    type: str,
    default: Any,
    doc: str,
    component: str,
    choices: Iterable[Any] | None = None,
    range: str | None = None,
    true_means: Any = None,
) -> Option:
    """Declare an option. Each name is declared once (a plugin module's declaration may be read twice:
    from its source without importing it, then when it is imported)."""
    for atom in type.split("|"):
        _atom_matches(atom.strip(), None)  # fails early on a typo in the type spec
    option = Option(name, type, default, doc, component, tuple(choices) if choices else None, range, true_means)
    if name in _REGISTRY and _REGISTRY[name] != option:
        raise ValueError(f"option {name!r} is registered twice")
    if range is not None:
        parse_interval(range)  # fails early on a malformed range
    if option.range is not None and option.check(default) is not None:
        raise ValueError(f"option {name!r}: its default {default!r} is outside its range")
    _REGISTRY[name] = option
    return option


def _read_plugin_options() -> None:
    """Register the options that modules declare, without importing them (and torch): the framework's own and those
    of installed packages' plugin modules (``framework.base.declarations``).

    A module declares its options with top-level ``register(...)`` calls; only the declaring modules are parsed.
    """
    global _plugins_read
    if _plugins_read:
        return
    _plugins_read = True
    for module, path, source in declarations.framework_modules("options"):
        if module != __name__:  # this module's options registered as it ran
            read_declared_options(module, source, path)
    for module in declarations.installed_modules("plugins"):
        read_declared_options(module)


def read_declared_options(module_name: str, source: str | None = None, path: str | None = None) -> None:
    """Register the options that ``module_name`` declares at its top level, from its source.

    Declarations with anything but literals as arguments make the module be imported instead.
    """
    if source is None:
        path = importlib.util.find_spec(module_name).origin
        with open(path, encoding="utf-8") as f:
            source = f.read()
    tree = ast.parse(source, path)
    for node in tree.body:
        call = node.value if isinstance(node, (ast.Expr, ast.Assign)) else None
        if not (isinstance(call, ast.Call) and isinstance(call.func, ast.Name) and call.func.id == "register"):
            continue
        try:
            args = [_literal(a, module_name) for a in call.args]
            kwargs = {k.arg: _literal(k.value, module_name) for k in call.keywords}
        except ValueError:
            importlib.import_module(module_name)  # registers as it runs
            return
        register(*args, **kwargs)


def _literal(node: ast.expr, module_name: str) -> Any:
    if isinstance(node, ast.Name) and node.id == "__name__":
        return module_name
    return ast.literal_eval(node)


def get(name: str) -> Option | None:
    """The registered option called ``name``, or None."""
    if name not in _REGISTRY:
        _read_plugin_options()
    return _REGISTRY.get(name)


def all_options() -> list[Option]:
    """Every registered option, sorted by component, then name."""
    _read_plugin_options()
    return sorted(_REGISTRY.values(), key=lambda o: (o.component, o.name))


def closest_name(name: str, cutoff: float = 0.8) -> str | None:
    """The registered option name closest to ``name``, if any is close enough to be a typo."""
    matches = closest_names(name, n=1, cutoff=cutoff)
    return matches[0] if matches else None


def closest_names(name: str, n: int, cutoff: float) -> list[str]:
    """Up to ``n`` registered option names similar to ``name``, the closest first."""
    _read_plugin_options()
    return difflib.get_close_matches(name, list(_REGISTRY), n=n, cutoff=cutoff)
