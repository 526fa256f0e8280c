"""The plugin seam: a diagnostic (or an optional training feature) is one class in one module.

A plugin module declares its options with ``register(...)`` at its top, with literal arguments
(the registry reads them from the source, so validating a config and ``--help-options`` do not
import the module and torch), and lists its plugin classes in ``PLUGINS``. A plugin builds
itself from the config in ``from_config``, or declines by returning None when its options leave
it off; its methods marked ``@on(Event.X)`` are subscribed in its ``order`` (or the order given
to ``on``). Callbacks read the typed ``RunState`` and act through ``state.control``; what a plugin
holds (hooks, files, processes, signal handlers) it releases at ``Event.CLOSE``.

Built-in plugins are listed, in order, in ``framework.core.plugins.BUILTIN_PLUGIN_MODULES``; a config
adds its own with ``plugins = ["my_package.my_plugin"]`` (see docs/writing_a_diagnostic.rst).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, ClassVar

from framework.core.events import Callbacks, Event, Order

if TYPE_CHECKING:
    from framework.config import Config
    from framework.core.state import RunState

TASKS = ("train", "eval", "forward")


def on(event: Event, order: int | None = None) -> Callable[[Callable], Callable]:
    """Mark a plugin method as the callback of ``event`` (several ``on`` may mark one method)."""

    def mark(method: Callable) -> Callable:
        method._plugin_events = [*getattr(method, "_plugin_events", []), (event, order)]  # type: ignore[attr-defined]
        return method

    return mark


class Plugin:
    """Base class of plugins: override ``from_config`` and mark callbacks with ``@on``."""

    tasks: ClassVar[tuple[str, ...]] = ("train",)  # the tasks it is built for
    order: ClassVar[int] = Order.OBSERVE  # default order of its callbacks
    callbacks: Callbacks  # set by subscribe: to unsubscribe one-shot callbacks with callbacks.off

    @classmethod
    def from_config(cls, config: Config, state: RunState) -> Plugin | None:
        """The plugin for this run (model, optimizer and datasets exist), or None when it is off."""
        return cls()

    @classmethod
    def prepare(cls, config: Config) -> None:
        """Adjust the config before the run is set up (e.g. a verdict run's data); most plugins need not."""

    def subscribe(self, callbacks: Callbacks) -> None:
        """Bind every ``@on``-marked method to its event."""
        self.callbacks = callbacks
        methods: dict[str, Any] = {}
        for klass in reversed(type(self).__mro__):
            methods.update({name: f for name, f in vars(klass).items() if hasattr(f, "_plugin_events")})
        for name, function in methods.items():
            for event, order in function._plugin_events:
                callbacks.on(event, getattr(self, name), self.order if order is None else order)
