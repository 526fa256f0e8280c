"""The config keys RETURNN reads, found in RETURNN's own source: every ``config.value("x", ...)``,
``config.typed_value("x")``, ``config.bool/int/float/list/has/...("x")``, ``get_global_config().…("x")``,
``config.typed_dict["x"]`` and ``config.typed_dict.get("x")``, per module, and the backend that module belongs to;
a key may be an f-string or conditional whose every spelling is in the source (``f"batch_size_{'train' if train else
'dev'}"``).

``tools/extract-returnn-options.py`` prints them for the installed RETURNN; ``docs/returnn_vocabulary.inc`` is the
table with what each key does here (``tests/test_returnn_vocabulary.py`` checks it against the installed RETURNN).
"""

from __future__ import annotations

import ast
import os
from dataclasses import dataclass, field

# Config methods whose first argument is a key (returnn/config.py: class Config).
READERS = frozenset(
    "value typed_value opt_typed_value bool bool_or_other int float list int_list float_list int_pair has is_true "
    "is_typed is_of_type get_of_type".split()
)
BACKENDS = ("torch", "generic", "tf", "jax", "sprint")


@dataclass
class Key:
    """One config key RETURNN reads: the modules (``returnn/torch/engine.py``) that read it, and their backends."""

    name: str
    modules: set[str] = field(default_factory=set)

    @property
    def backends(self) -> set[str]:
        """The backends of the modules that read it (``backend_of``)."""
        return {backend_of(module) for module in self.modules}


def backend_of(module: str) -> str:
    """The backend a RETURNN module belongs to: its TensorFlow, JAX or RASR (sprint) code, its torch engine, or
    generic code that every backend runs (config handling, datasets, learning-rate control, the frontend)."""
    parts = module.split("/")
    if len(parts) > 2 and parts[1] in ("tf", "jax", "torch", "sprint"):
        return parts[1]
    return "generic"


def _looks_like_config(node: ast.expr) -> bool:
    """Whether the receiver of a reader call is a RETURNN Config: a name or attribute spelled like one
    (``config``, ``self.config``, ``_config``, ``cfg``) or a ``get_global_config(...)`` call."""
    if isinstance(node, ast.Call):
        func = node.func
        name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
        return name in ("get_global_config", "_get_config", "get_config")
    name = node.attr if isinstance(node, ast.Attribute) else getattr(node, "id", "")
    return "config" in name.lower() or name in ("cfg", "c")


def keys_in_source(source: str) -> set[str]:
    """The config keys one RETURNN module reads (string literals, and f-strings and conditionals built of them: a key
    built at run time from a variable is not a name)."""
    found = set()
    for node in ast.walk(ast.parse(source)):
        if (
            isinstance(node, ast.For)
            and isinstance(node.target, ast.Name)
            and isinstance(node.iter, (ast.List, ast.Tuple))
        ):
            found |= _keys_of_loop(node)  # for name in ["a", "b"]: config.float(name, 0.0)
        key = None
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.args:
            func = node.func
            if func.attr in READERS and _looks_like_config(func.value):
                key = node.args[0]
            elif func.attr in ("get", "pop", "setdefault") and _is_typed_dict(func.value):
                key = node.args[0]
        elif isinstance(node, ast.Subscript) and _is_typed_dict(node.value):
            key = node.slice
        elif isinstance(node, ast.Compare) and len(node.ops) == 1 and isinstance(node.ops[0], (ast.In, ast.NotIn)):
            if _is_typed_dict(node.comparators[0]):
                key = node.left
        for name in _spellings(key) if key is not None else ():
            if name.isidentifier():
                found.add(name)
    return found


def _spellings(node: ast.expr) -> list[str]:
    """Every string ``node`` can be where the source spells them all out: a string literal, a conditional of such
    (``"a" if x else "b"``), or an f-string built of them (RETURNN's torch engine reads
    ``f"batch_size_{'train' if train else 'dev'}"``: batch_size_train and batch_size_dev); [] for a key computed at
    run time from something else (a variable), which names no key."""
    if isinstance(node, ast.Constant):
        return [node.value] if isinstance(node.value, str) else []
    if isinstance(node, ast.IfExp):
        body, orelse = _spellings(node.body), _spellings(node.orelse)
        return body + orelse if body and orelse else []
    if isinstance(node, ast.FormattedValue):
        return _spellings(node.value) if node.conversion == -1 and node.format_spec is None else []
    if isinstance(node, ast.JoinedStr):
        texts = [""]
        for part in node.values:
            options = _spellings(part)
            if not options:
                return []
            texts = [text + option for text in texts for option in options]
        return texts
    return []


def _keys_of_loop(loop: ast.For) -> set[str]:
    """The string items of a ``for`` loop's literal list when its body reads the config with the loop variable."""
    names = [e.value for e in loop.iter.elts if isinstance(e, ast.Constant) and isinstance(e.value, str)]
    for node in ast.walk(ast.Module(body=loop.body, type_ignores=[])):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr in READERS
            and _looks_like_config(node.func.value)
            and node.args
            and isinstance(node.args[0], ast.Name)
            and node.args[0].id == loop.target.id
        ):
            return {name for name in names if name.isidentifier()}
    return set()


def _is_typed_dict(node: ast.expr) -> bool:
    return isinstance(node, ast.Attribute) and node.attr == "typed_dict" and _looks_like_config(node.value)


def returnn_keys(package_dir: str) -> dict[str, Key]:
    """Every config key the RETURNN package at ``package_dir`` (``.../site-packages/returnn``) reads."""
    keys: dict[str, Key] = {}
    root = os.path.dirname(package_dir)
    for directory, dirs, files in os.walk(package_dir):
        dirs[:] = sorted(d for d in dirs if d not in ("__pycache__", "extern"))
        for name in sorted(files):
            if not name.endswith(".py"):
                continue
            path = os.path.join(directory, name)
            with open(path, encoding="utf-8") as f:
                try:
                    found = keys_in_source(f.read())
                except SyntaxError:
                    continue
            module = os.path.relpath(path, root).replace(os.sep, "/")
            for key in found:
                keys.setdefault(key, Key(key)).modules.add(module)
    return keys


def installed_returnn_dir() -> str | None:
    """The directory of the installed RETURNN package, or None if RETURNN is not installed."""
    import importlib.util

    spec = importlib.util.find_spec("returnn")
    return os.path.dirname(spec.origin) if spec is not None and spec.origin else None
