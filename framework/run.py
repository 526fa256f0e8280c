"""The engine with the built-in plugins: what ``rnn.py`` and the tools run.

The training engine (``framework.training.engine``) sits below the diagnostics, so it cannot name them; this
entry-point module finds the built-in plugins and gives them to it.
"""

from __future__ import annotations

import importlib
import os

from framework.config import Config
from framework.core.events import Callbacks
from framework.core.plugin import Plugin
from framework.training import engine

# The packages whose modules are built-in plugins: a module there that lists ``PLUGINS = (...)`` at its top level
# joins every run (its plugins decline in ``from_config`` when their options leave them off).
PLUGIN_PACKAGES = ("framework.training", "framework.debug")


def builtin_plugin_modules() -> list[str]:
    """The names of the built-in plugin modules, found by a text search of the plugin packages' source (no
    import): sorted by name, since no list position decides anything (the order is declared, ties by name)."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    found = []
    for package in PLUGIN_PACKAGES:
        directory = os.path.join(root, *package.split("."))
        for name in sorted(os.listdir(directory)):
            if name.endswith(".py"):
                with open(os.path.join(directory, name), encoding="utf-8") as f:
                    if "\nPLUGINS = " in f.read():
                        found.append(f"{package}.{name[:-3]}")
    return sorted(found)


def plugin_classes() -> list[type[Plugin]]:
    """The built-in plugin classes, sorted by name (their callbacks' order is declared, ties by name)."""
    classes = []
    for name in builtin_plugin_modules():
        classes += list(importlib.import_module(name).PLUGINS)
    return sorted(classes, key=lambda cls: cls.name)


class Engine(engine.Engine):
    """The engine of a run, with the built-in plugins."""

    def __init__(self, config: Config, callbacks: Callbacks | None = None):
        super().__init__(config, callbacks, plugin_classes)
