"""The engine with the built-in features and plugins: what ``rnn.py`` and the tools run.

The core's engine (``framework.core.engine``) reaches training features and plugins only through
``framework.core.features.Features``; this entry-point module gives it the built-in ones.
"""

from __future__ import annotations

import importlib
import os

from framework.config import Config
from framework.training import engine
from framework.core.events import Callbacks
from framework.core.plugin import Plugin
from framework.inspection.freezes import record_freezes
from framework.training.features import TrainingFeatures

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


class BuiltinFeatures(TrainingFeatures):
    """The training features, the built-in plugins and the model-build watch of the sanity check."""

    @staticmethod
    def plugin_classes() -> list[type[Plugin]]:
        """The built-in plugin classes, sorted by name (their callbacks' order is declared, ties by name)."""
        classes = []
        for name in builtin_plugin_modules():
            classes += list(importlib.import_module(name).PLUGINS)
        return sorted(classes, key=lambda cls: cls.name)

    # parameters a library freezes by design are no finding of the sanity check
    watch_model_build = staticmethod(record_freezes)


class Engine(engine.Engine):
    """The engine of a run, with the built-in features and plugins."""

    def __init__(self, config: Config, callbacks: Callbacks | None = None):
        super().__init__(config, callbacks, BuiltinFeatures())
