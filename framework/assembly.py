"""The engine with the built-in plugins: what ``rnn.py`` and the tools run.

The training engine (``framework.training.engine``) sits below the diagnostics, so it cannot name them; this
entry-point module imports the plugin modules and gives their classes to it.
"""

from __future__ import annotations

import importlib

from framework.base import declarations
from framework.base.config import Config
from framework.core.events import Callbacks
from framework.core.plugin import Plugin
from framework.training import engine


def plugin_classes() -> list[type[Plugin]]:
    """The plugin classes every run builds (each declines in ``from_config`` when its options leave it off): those of
    the modules that declare ``PLUGINS`` (``framework.base.declarations``: the framework's own, then installed packages'
    ``framework.plugins`` entry points), sorted by name (their callbacks' order is declared, ties by name)."""
    classes = []
    for name in declarations.declaring_modules("plugins"):
        classes += list(importlib.import_module(name).PLUGINS)
    return sorted(classes, key=lambda cls: cls.name)


class Engine(engine.Engine):
    """The engine of a run, with the built-in plugins."""

    def __init__(self, config: Config, callbacks: Callbacks | None = None):
        super().__init__(config, callbacks, plugin_classes)
