"""The plugins of a run: the built-in ones the engine is given, plus the config's ``plugins``.

Importing this module loads nothing heavy: the option registry reads the plugin modules'
``register(...)`` declarations from their source (``framework.base.options.read_declared_options``), and the modules
themselves are imported when a run builds its plugins.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from framework.base import log
from framework.base.config import import_plugin_modules
from framework.base.errors import ConfigError
from framework.core.events import OrderError

if TYPE_CHECKING:
    from framework.base.config import Config
    from framework.core.events import Callbacks
    from framework.core.plugin import Plugin
    from framework.core.state import RunState
    from framework.core.store import Key


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
        found += list(module.PLUGINS)  # import_plugin_modules made sure it has some
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
        relate(built, callbacks, state.store.producer)
    except (OrderError, TypeError) as exc:
        raise ConfigError(f"plugins: {exc}. Fix the plugins' 'provides', 'after', 'before' or 'needs'.") from None
    log.v5(callbacks.explain())
    return built


def relate(plugins: list[Plugin], callbacks: Callbacks, producer: Callable[[Key], str | None]) -> None:
    """Turn the plugins' declared relations into order constraints: ``after`` / ``before`` (``"*"``: every other
    plugin of the run), and a consumer of a measurement after its ``producer``."""
    for plugin in plugins:
        for other in _named(plugin, "after", plugins):
            callbacks.require(other, plugin.name)
        for other in _named(plugin, "before", plugins):
            callbacks.require(plugin.name, other)
        for key in plugin.needs:
            made_by = producer(key)
            if made_by is not None and made_by != plugin.name:
                callbacks.require(made_by, plugin.name)


def _named(plugin: Plugin, relation: str, plugins: list[Plugin]) -> list[str]:
    """The plugins of this run that ``plugin``'s ``after`` or ``before`` names: ``"*"`` names all others except
    those that say ``"*"`` in the same relation too (they order themselves by name)."""
    names: tuple[str, ...] = getattr(plugin, relation)
    if "*" in names:
        return [p.name for p in plugins if p is not plugin and "*" not in getattr(p, relation)]
    return [p.name for p in plugins if p.name in names]


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
        unknown = [name for name in cls.after + cls.before if name not in known and name != "*"]
        if unknown:
            raise ConfigError(
                f"plugins: {cls.name} names {unknown[0]!r} in after/before, but no plugin is called that "
                f"(known: {', '.join(sorted(known))})."
            )
