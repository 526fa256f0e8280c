"""The plugins of a run: the built-in ones in their order, plus the config's ``plugins``.

Importing this module loads nothing heavy: the option registry reads the plugin modules'
``register(...)`` declarations from their source (``read_declared_options``), and the modules
themselves are imported when a run builds its plugins.
"""

from __future__ import annotations

import ast
import importlib
import importlib.util
from typing import TYPE_CHECKING, Any

from framework import options
from framework.errors import ConfigError

if TYPE_CHECKING:
    from framework.config import Config
    from framework.events import Callbacks
    from framework.plugin import Plugin
    from framework.state import RunState

# Ties within one Order are broken by this list: earlier modules' callbacks run first.
BUILTIN_PLUGIN_MODULES = (
    "framework.user_callbacks",
    "framework.amp",
    "framework.compile",
    "framework.optim",
    "framework.lr_control",
    "framework.lr_file",
    "framework.checkpoint_cleanup",
    "framework.early_stopping",
    "framework.unusual_values",
    "framework.debug.exception_context",
    "framework.debug.interrupt",
    "framework.debug.shell",
    "framework.debug.crash",
    "framework.debug.numerics",
    "framework.debug.amp_check",
    "framework.debug.layer_template",
    "framework.debug.layer_shapes",
    "framework.debug.loss_inputs",
    "framework.debug.device_check",
    "framework.debug.padding_probe",
    "framework.debug.batch_independence",
    "framework.debug.split_overlap",
    "framework.debug.stale_gradients",
    "framework.debug.sanity",
    "framework.debug.grad_health",
    "framework.debug.learning_watch",
    "framework.debug.verdicts",
    "framework.debug.fingerprints",
    "framework.debug.step_time",
    "framework.debug.memory",
    "framework.debug.profiling",
    "framework.debug.tensorboard",
    "framework.progress",
)


def read_declared_options(module_name: str) -> None:
    """Register the options that ``module_name`` declares at its top level, from its source.

    Declarations with anything but literals as arguments make the module be imported instead.
    """
    spec = importlib.util.find_spec(module_name)
    with open(spec.origin, encoding="utf-8") as f:
        tree = ast.parse(f.read(), spec.origin)
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
        options.register(*args, **kwargs)


def _literal(node: ast.expr, module_name: str) -> Any:
    if isinstance(node, ast.Name) and node.id == "__name__":
        return module_name
    return ast.literal_eval(node)


def import_user_plugins(config: Config) -> list[type[Plugin]]:
    """The plugin classes the config's ``plugins`` names (importing a module registers its options)."""
    from framework.plugin import Plugin

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
            raise ConfigError(f"plugins: cannot import {entry!r}: {exc}. Is it on the Python path?") from None
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
    """Let every plugin of ``task`` adjust the config before the run is set up."""
    for cls in plugin_classes(config):
        if task in cls.tasks:
            cls.prepare(config)


def build_plugins(config: Config, state: RunState, callbacks: Callbacks) -> list[Plugin]:
    """Build the plugins of ``state.task`` that the config turns on and subscribe them."""
    built = []
    for cls in plugin_classes(config):
        if state.task not in cls.tasks:
            continue
        plugin = cls.from_config(config, state)
        if plugin is not None:
            plugin.subscribe(callbacks)
            built.append(plugin)
    return built
