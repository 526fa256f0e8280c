"""The config's own callbacks: ``callbacks = {"epoch_end": fn, "close": [fn1, fn2], ...}``.

Each ``fn(state)`` gets the run's ``RunState`` and runs before the framework's callbacks of
the same event (``Order.USER``). For more than a function or two, write a plugin instead
(docs/writing_a_diagnostic.rst): it can declare options and hold state.
"""

from __future__ import annotations

from typing import Any

from framework.base.config import Config
from framework.base.errors import ConfigError
from framework.core.events import Callbacks, Event, Order
from framework.core.plugin import TASKS, Plugin


class UserCallbacks(Plugin):
    """Binds each function of the ``callbacks`` option to its event."""

    tasks = TASKS

    def __init__(self, bound: list[tuple[Event, Any]]):
        self.bound = bound

    @classmethod
    def from_config(cls, config: Config, state: Any) -> UserCallbacks | None:
        names = {event.value: event for event in Event}
        bound = []
        for name, fns in (config.get("callbacks") or {}).items():
            if name not in names:
                raise ConfigError(f"callbacks: unknown event {name!r}; events are {', '.join(names)}.")
            for fn in fns if isinstance(fns, (list, tuple)) else [fns]:
                if not callable(fn):
                    raise ConfigError(
                        f"callbacks[{name!r}] must be a function fn(state) or a list of them, got {fn!r}."
                    )
                bound.append((names[name], fn))
        return cls(bound) if bound else None

    def subscribe(self, callbacks: Callbacks) -> None:
        self.callbacks = callbacks
        for event, fn in self.bound:
            callbacks.on(event, fn, Order.USER)


PLUGINS = (UserCallbacks,)
