"""The plugins of a run: the built-in ones in their order, plus the config's ``plugins``.

Importing this module loads nothing heavy: the option registry reads the plugin modules'
``register(...)`` declarations from their source (``framework.options.read_declared_options``), and the modules
themselves are imported when a run builds its plugins.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

from framework import log
from framework.core.builtin_plugins import BUILTIN_PLUGIN_MODULES
from framework.core.events import OrderError
from framework.errors import ConfigError

if TYPE_CHECKING:
    from framework.config import Config
    from framework.core.events import Callbacks
    from framework.core.plugin import Plugin
    from framework.core.state import RunState


def import_user_plugins(config: Config) -> list[type[Plugin]]:
    """The plugin classes the config's ``plugins`` names (importing a module registers its options)."""
    from framework.core.plugin import Plugin

    found: list[type[Plugin]] = []
    for entry in config.get("plugins") or []:  # an override wins over the files, as for any option
        if isinstance(entry, type) and issubclass(entry, Plugin):
            found.append(entry)
            continue
        if not isinstance(entry, str):
            raise ConfigError(f"plugins: {entry!r} is neither a module name nor a Plugin subclass.")
        try:
            module = importlib.import_module(entry)
        except ImportError as exc:
            raise ConfigError(
                f"plugins: cannot import {entry!r}: {exc}. Is its directory on the Python path? rnn.py does not "
                "search the config's directory: set PYTHONPATH, or add it in the config (sys.path.insert(0, "
                "os.path.dirname(__file__))); see docs/writing_a_diagnostic.rst."
            ) from None
        classes = getattr(module, "PLUGINS", None)
        if not classes:
            raise ConfigError(f"plugins: module {entry!r} has no PLUGINS = (MyPlugin, ...) listing its plugin classes.")
        found += list(classes)
    return found


def plugin_classes(config: Config) -> list[type[Plugin]]:
    """Every plugin class of a run: the built-in ones in order, then the config's own."""
    classes = []
    for name in BUILTIN_PLUGIN_MODULES:
        classes += list(importlib.import_module(name).PLUGINS)
    return classes + import_user_plugins(config)


def prepare_config(config: Config, task: str) -> None:
    """Let every plugin of ``task`` set the option values its mode needs before the run is set up."""
    for cls in plugin_classes(config):
        if task in cls.tasks:
            values = cls.prepare(config)
            if values:
                config.derive(values, by=cls.name)


def build_plugins(config: Config, state: RunState, callbacks: Callbacks) -> list[Plugin]:
    """Build the plugins of ``state.task`` that the config turns on, subscribe them and resolve their order.

    The order (``Callbacks.explain``) is logged at verbosity 5.
    """
    classes = plugin_classes(config)
    _check_declarations(classes)
    built = []
    for cls in classes:
        if state.task not in cls.tasks:
            continue
        plugin = cls.from_config(config, state)
        if plugin is not None:
            plugin.subscribe(callbacks)
            built.append(plugin)
    names = [p.name for p in built]
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        raise ConfigError(f"plugins: two plugins are named {duplicates[0]!r}; give one a distinct 'name'.")
    try:
        for plugin in built:
            for key in plugin.provides:
                state.store.declare(key, plugin.name)
        for plugin in built:
            for other in plugin.after:
                if other in names:
                    callbacks.require(other, plugin.name)
            for other in plugin.before:
                if other in names:
                    callbacks.require(plugin.name, other)
            for key in plugin.needs:
                producer = state.store.producer(key)
                if producer is not None and producer != plugin.name:
                    callbacks.require(producer, plugin.name)
    except (OrderError, TypeError) as exc:
        raise ConfigError(f"plugins: {exc}. Fix the plugins' 'provides', 'after', 'before' or 'needs'.") from None
    log.v5(callbacks.explain())
    return built


def _check_declarations(classes: list[type[Plugin]]) -> None:
    """Every plugin's relations name plugins that exist (on or off in this run) and are tuples, not strings."""
    known = {cls.name for cls in classes}
    for cls in classes:
        for attribute in ("after", "before", "provides", "needs"):
            value = getattr(cls, attribute)
            if not isinstance(value, tuple):
                raise ConfigError(
                    f"plugins: {cls.name}.{attribute} = {value!r} is not a tuple; write e.g. {attribute} = ({value!r},)."
                )
        unknown = [name for name in cls.after + cls.before if name not in known]
        if unknown:
            raise ConfigError(
                f"plugins: {cls.name} names {unknown[0]!r} in after/before, but no plugin is called that "
                f"(known: {', '.join(sorted(known))})."
            )
