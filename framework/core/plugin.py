"""The plugin seam: a diagnostic (or an optional training feature) is one class in one module.

A plugin module declares its options with ``register(...)`` at its top, with literal arguments
(the registry reads them from the source, so validating a config and ``--help-options`` do not
import the module and torch), and lists its plugin classes in ``PLUGINS``. A plugin builds
itself from the config in ``from_config``, or declines by returning None when its options leave
it off; its methods marked ``@on(Event.X)`` are subscribed in its ``order`` (or the order given
to ``on``; ``once=True`` for a callback that runs the first time only).

How plugins relate is declared, never implied: ``after`` / ``before`` name plugins whose
callbacks must run before / after this one's, ``provides`` / ``needs`` name the shared
measurements (``framework.core.store``) it puts / reads (a consumer runs after the producer).
The engine resolves the order once at startup (``rnn.py CONFIG --explain-plugins`` prints it).
Callbacks read the typed ``RunState`` and act through ``state.control``; only the engine writes
the state. What a plugin must remember across a resume it returns from ``state_dict`` (saved in
every checkpoint) and takes back in ``load_state_dict``; what it holds (hooks, files, processes,
signal handlers) it releases at ``Event.CLOSE``.

Built-in plugins are the modules of ``framework.training`` and ``framework.debug`` that list
``PLUGINS``, installed packages add theirs through the ``framework.plugins`` entry points (``framework.base.declarations``
finds both, no central list); a config adds its own with ``plugins = ["my_package.my_plugin"]`` (see
docs/writing_a_diagnostic.rst).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, ClassVar

from framework.core.events import Callbacks, Event, Order
from framework.core.store import Key

if TYPE_CHECKING:
    from framework.base.config import Config
    from framework.core.state import RunState

TASKS = ("train", "eval", "forward")


def on(event: Event, order: int | None = None, *, once: bool = False) -> Callable[[Callable], Callable]:
    """Mark a plugin method as the callback of ``event`` (several ``on`` may mark one method)."""

    def mark(method: Callable) -> Callable:
        method._plugin_events = [*getattr(method, "_plugin_events", []), (event, order, once)]  # type: ignore[attr-defined]
        return method

    return mark


class Plugin:
    """Base class of plugins: override ``from_config`` and mark callbacks with ``@on``."""

    name: ClassVar[str]  # how constraints, the explained order and checkpoints name it: the class name by default
    tasks: ClassVar[tuple[str, ...]] = ("train",)  # the tasks it is built for
    order: ClassVar[int] = Order.OBSERVE  # default order of its callbacks
    after: ClassVar[tuple[str, ...]] = ()  # plugins whose callbacks run before this one's (if on); "*": all others
    before: ClassVar[tuple[str, ...]] = ()  # plugins whose callbacks run after this one's (if they are on)
    provides: ClassVar[tuple[Key, ...]] = ()  # measurements it puts into state.store
    needs: ClassVar[tuple[Key, ...]] = ()  # measurements it reads from state.store (None while absent)
    # A bug check on by default (at the first step, an epoch end or a symptom): the bool options that switch it off
    # (the benchmarks' "all checks off" set is these)
    bug_check: ClassVar[tuple[str, ...]] = ()
    callbacks: Callbacks  # set by subscribe: to unsubscribe callbacks with callbacks.off

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "name" not in cls.__dict__:
            cls.name = cls.__name__

    @classmethod
    def from_config(cls, config: Config, state: RunState) -> Plugin | None:
        """The plugin for this run (model, optimizer and datasets exist), or None when it is off."""
        return cls()

    @classmethod
    def prepare(cls, config: Config) -> dict[str, Any]:
        """Option values this plugin's mode needs, set before the run is set up and validated like ``++``
        overrides (e.g. a verdict run's epochs and data); most plugins need none."""
        return {}

    def state_dict(self) -> dict[str, Any] | None:
        """What this plugin must remember across a resume (saved in each checkpoint); None: nothing."""
        return None

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Take back what ``state_dict`` returned, when a run resumes from a checkpoint."""

    def subscribe(self, callbacks: Callbacks) -> None:
        """Bind every ``@on``-marked method to its event."""
        self.callbacks = callbacks
        methods: dict[str, Any] = {}
        for klass in reversed(type(self).__mro__):
            methods.update({name: f for name, f in vars(klass).items() if hasattr(f, "_plugin_events")})
        for name, function in methods.items():
            for event, order, once in function._plugin_events:
                callbacks.on(event, getattr(self, name), self.order if order is None else order, once=once)
