"""The plugins of a run: the built-in ones the engine is given, plus the config's ``plugins``.

Importing this module loads nothing heavy: the option registry reads the plugin modules'
``register(...)`` declarations from their source (``framework.options.read_declared_options``), and the modules
themselves are imported when a run builds its plugins.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from framework import log
from framework.config import import_plugin_modules
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
    for entry, module in import_plugin_modules(config):
        if module is None:
            if not issubclass(entry, Plugin):
                raise ConfigError(f"plugins: {entry!r} is neither a module name nor a Plugin subclass.")
            found.append(entry)
            continue
        classes = getattr(module, "PLUGINS", None)
        if not classes:
            raise ConfigError(f"plugins: module {entry!r} has no PLUGINS = (MyPlugin, ...) listing its plugin classes.")
        found += list(classes)
    return found


def prepare_config(config: Config, task: str, builtin: list[type[Plugin]]) -> None:
    """Let every plugin of ``task`` (the ``builtin`` ones, then the config's) set the option values its mode
    needs before the run is set up."""
    for cls in builtin + import_user_plugins(config):
        if task in cls.tasks:
            values = cls.prepare(config)
            if values:
                config.derive(values, by=cls.name)


def build_plugins(config: Config, state: RunState, callbacks: Callbacks, builtin: list[type[Plugin]]) -> list[Plugin]:
    """Build the plugins of ``state.task`` that the config turns on (of the ``builtin`` ones, then the config's),
    subscribe them and resolve their order.

    The order (``Callbacks.explain``) is logged at verbosity 5.
    """
    classes = builtin + import_user_plugins(config)
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
