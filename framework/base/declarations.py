"""The one way modules make themselves known: options, plugins and datasets, each declared where it is owned.

A module declares at its top level what it owns: options with ``register(...)`` calls (``framework.base.options``), its
plugin classes with a ``PLUGINS = (...)`` tuple, its dataset classes with a ``DATASETS = (...)`` tuple. The
framework's own declaring modules are found by a text search of the package's source, so nothing is imported to
find them (option validation and ``--help-options`` run before torch is loaded). Another installed package adds its
own modules through Python entry points, with no edit to the framework: group ``framework.plugins`` names modules
that declare ``PLUGINS`` (and their options with ``register(...)``), group ``framework.datasets`` modules that
declare ``DATASETS``. In its ``pyproject.toml``::

    [project.entry-points."framework.plugins"]
    my_check = "my_package.my_check"

    [project.entry-points."framework.datasets"]
    my_data = "my_package.my_data"
"""

from __future__ import annotations

import functools
import importlib.metadata
import os
import sys

# What a declaring module has at the start of a line of its source, per kind of declaration.
MARKERS = {"options": "\nregister(", "plugins": "\nPLUGINS = ", "datasets": "\nDATASETS = "}
# The kinds that other installed packages add modules of, each through the entry-point group framework.<kind>.
INSTALLABLE = ("plugins", "datasets")

_PACKAGE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@functools.cache
def _sources() -> tuple[tuple[str, str, str], ...]:
    """(module name, path, source) of every module of the package, in the order of a sorted walk."""
    found = []
    for directory, _, files in sorted(os.walk(_PACKAGE)):
        for name in sorted(files):
            if name.endswith(".py"):
                path = os.path.join(directory, name)
                module = os.path.relpath(path[:-3], os.path.dirname(_PACKAGE)).replace(os.sep, ".")
                with open(path, encoding="utf-8") as f:
                    found.append((module.removesuffix(".__init__"), path, f.read()))
    return tuple(found)


def framework_modules(kind: str, package: str = "framework") -> list[tuple[str, str, str]]:
    """(module name, path, source) of the framework's modules under ``package`` that declare ``kind`` (options,
    plugins or datasets), in the order of a sorted walk of the package."""
    marker = MARKERS[kind]
    return [
        (module, path, source)
        for module, path, source in _sources()
        if (module == package or module.startswith(package + ".")) and marker in source
    ]


def installed_modules(kind: str) -> list[str]:
    """The modules that installed packages add for ``kind`` (plugins or datasets) through their entry points, sorted;
    an entry point's value is a module name (``module:attribute`` counts as its module)."""
    assert kind in INSTALLABLE, kind
    return list(_installed_modules(kind, _path_state()))


def _path_state() -> tuple[tuple[str, int], ...]:
    """``sys.path`` with each folder's modification time: an install into a folder (or a folder added) changes it."""
    state = []
    for entry in sys.path:
        try:
            state.append((entry, os.stat(entry or ".").st_mtime_ns))
        except OSError:
            state.append((entry, -1))
    return tuple(state)


@functools.lru_cache(maxsize=8)
def _installed_modules(kind: str, _path: tuple[tuple[str, int], ...]) -> tuple[str, ...]:
    """installed_modules for the installs ``_path`` stands for: reading every installed distribution's entry points
    takes ~15 ms, and a run asks several times (plugins, datasets, options)."""
    entries = importlib.metadata.entry_points(group=f"framework.{kind}")
    return tuple(sorted({entry.value.partition(":")[0].strip() for entry in entries}))


def declaring_modules(kind: str, package: str = "framework") -> list[str]:
    """The names of the modules that declare ``kind``: the framework's own under ``package``, sorted, then those of
    installed packages (plugins and datasets)."""
    own = sorted(module for module, _, _ in framework_modules(kind, package))
    return own + (installed_modules(kind) if kind in INSTALLABLE else [])
