"""Named engine events and the callbacks bound to them, in an order resolved once and printable.

The engine loop only calls ``emit``, which does nothing for an event without subscribers. A
callback gets the run's ``RunState`` (``framework.core.state``): model, optimizer, batch, step,
epoch, run context, ``state.control`` (the one channel through which a callback acts) and
``state.store`` (measurements plugins share).

Order: each callback has an ``Order`` (a phase) and an owner (its plugin). Owners can require to
run before or after others (``Plugin.after``, ``Plugin.before``, and a plugin that needs a
measurement runs after its producer); such constraints win over phases. Within these, lower
phases run first, callbacks of the same phase by their owner's name, and one owner's callbacks
in the order they were added: no list position decides the order. So clipping
(TRAINING) changes the gradients before gradient health (OBSERVE) looks at them, and the step line
(REPORT) prints what every diagnostic added to the step. ``Callbacks.explain()`` prints the result.
"""

from __future__ import annotations

import enum
import heapq
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from framework.core.callback_profile import CallbackProfile


class Event(enum.Enum):
    """Points in the run where callbacks can act."""

    STARTUP = "startup"  # model, optimizer (training) and datasets are ready; in every task
    EPOCH_START = "epoch_start"
    STEP_START = "step_start"  # a training batch is on the device, before train_step
    AFTER_FORWARD = "after_forward"  # train_step returned; losses are marked
    AFTER_BACKWARD = "after_backward"
    BEFORE_OPTIMIZER_STEP = "before_optimizer_step"  # gradients complete; control.skip_update() skips it
    AFTER_OPTIMIZER_STEP = "after_optimizer_step"
    STEP_END = "step_end"
    EVAL_START = "eval_start"  # before the batches of one evaluation dataset (state.dataset names it)
    EVAL_STEP_START = "eval_step_start"  # an evaluation batch is on the device, before train_step
    EVAL_STEP_END = "eval_step_end"  # train_step returned on an evaluation batch (no backward, no update)
    EVAL_END = "eval_end"  # the dataset's scores are in state.eval_scores[state.dataset]
    EPOCH_END = "epoch_end"  # after evaluation, before the checkpoint is written
    CHECKPOINT_SAVED = "checkpoint_saved"
    FORWARD_STEP_START = "forward_step_start"  # task=forward: a batch is on the device, before forward_step
    FORWARD_STEP_END = "forward_step_end"  # forward_step returned; outputs are marked
    FINISH = "finish"  # the task completed (also after StopTraining)
    EXCEPTION = "exception"  # an exception escapes a step; state.exception holds it, it is re-raised after
    CLOSE = "close"  # always last, however the run ends (state.outcome says how): release what you hold

    # emit looks an event up about ten times per training step; Enum's own __hash__ is Python code (0.25 us a call),
    # and a member is only ever equal to itself
    __hash__ = object.__hash__


class Order(enum.IntEnum):
    """When a callback runs among those of the same event (lower first)."""

    FIRST = -100  # marks that must come before every other callback (step timing)
    USER = 0  # the config's own callbacks see the state before the framework's
    TRAINING = 100  # changes what is trained: clipping, schedules, parameter averaging, verdict data
    CHECK = 200  # decides about the step: numerics guard, sanity check (skip, stop)
    OBSERVE = 300  # reads the state: gradient health, learning watch, memory, fingerprints, TensorBoard
    REPORT = 400  # the step line and summaries, after everything else added to them
    LAST = 500  # marks that must come after every other callback (step timing)


Callback = Callable[[Any], None]


class StopTraining(Exception):
    """Raised by a callback to end training at once, cleanly: FINISH runs, no checkpoint of the partial epoch."""


class OrderError(Exception):
    """Ordering constraints between plugins that contradict each other."""


@dataclass
class _Entry:
    """One subscription: when it runs (phase, then owner name, then subscription order) and whose it is."""

    order: int
    added: int
    callback: Callback  # what emit calls (a once-callback's wrapper)
    original: Callback  # what was subscribed (what ``off`` names)
    owner: str

    @property
    def label(self) -> str:
        name = getattr(self.original, "__name__", type(self.original).__name__)
        return f"{self.owner}.{name}" if name != "<lambda>" else f"{self.owner}.<lambda>"


def owner_of(callback: Callback) -> str:
    """The name a callback is ordered by: its plugin's name, else its module."""
    bound = getattr(callback, "__self__", None)
    if bound is not None:
        return getattr(bound, "name", type(bound).__name__)
    return getattr(callback, "__module__", None) or "callback"


class Callbacks:
    """Callbacks per event, ordered by the owners' constraints, then by ``Order``, then by owner name, then by when
    they were added."""

    def __init__(self) -> None:
        self._entries: dict[Event, list[_Entry]] = {}
        self._resolved: dict[Event, tuple[Callback, ...]] = {}  # what emit runs: rebuilt on change, not per emit
        # events whose callbacks changed since: sorted again at their next emit, not at each change (a run makes
        # ~150 changes while its plugins subscribe and declare their order; sorting at each took ~0.05 s a run)
        self._stale: set[Event] = set()
        self._later: dict[str, set[str]] = {}  # owner -> owners whose callbacks must run after its own
        self._reach: dict[str, set[str]] = {}  # the same, transitively
        self._added = 0
        self._profile: CallbackProfile | None = None  # set by profile(): emit then runs timing wrappers

    def on(
        self,
        event: Event,
        callback: Callback,
        order: int = Order.OBSERVE,
        *,
        owner: str | None = None,
        once: bool = False,
    ) -> None:
        """Call ``callback(state)`` whenever ``event`` happens (``once``: the first time only)."""
        self._added += 1
        call = callback
        if once:

            def call(state: Any) -> None:
                self.off(event, callback)
                callback(state)

        entry = _Entry(int(order), self._added, call, callback, owner or owner_of(callback))
        self._entries.setdefault(event, []).append(entry)
        self._resolve(event)

    def off(self, event: Event, callback: Callback) -> None:
        """Stop calling ``callback`` for ``event``."""
        entries = self._entries.get(event, [])
        entries[:] = [e for e in entries if e.original != callback]
        self._resolve(event)

    def require(self, first: str, then: str) -> None:
        """At every event both subscribe to, the callbacks of owner ``first`` run before those of ``then``
        (and before those of every owner required after ``then``)."""
        self._later.setdefault(first, set()).add(then)
        cycle = self._cycle()
        if cycle:
            self._later[first].discard(then)
            raise OrderError(
                f"plugin order constraints form a cycle: {' -> '.join(cycle)} (each must run before the next)"
            )
        self._reach = {owner: self._reachable(owner) for owner in self._later}
        for event in self._entries:
            self._resolve(event)

    def emit(self, event: Event, state: Any) -> None:
        """Run the callbacks of ``event`` in order."""
        for callback in (self._handlers if self._stale else self._resolved).get(event, ()):
            callback(state)

    def emit_each(self, event: Event, state: Any) -> list[BaseException]:
        """Run every callback of ``event``, also after one raised; return what they raised, in order."""
        raised = []
        for callback in self._handlers.get(event, ()):
            try:
                callback(state)
            except Exception as exc:
                raised.append(exc)
        return raised

    def profile(self, clock: Callable[[], float] = time.perf_counter) -> CallbackProfile:
        """Time every callback from now on with ``clock``, per event and callback (``tools/benchmark-debug.py
        --profile-plugins``); without it, ``emit`` calls the callbacks themselves and times nothing."""
        if self._profile is None:
            self._profile = CallbackProfile(clock)
            for event in self._entries:
                self._resolve(event)
        return self._profile

    def order_of(self, event: Event) -> list[str]:
        """The callbacks of ``event`` as they run, named ``owner.method``."""
        return [e.label for e in self._sorted(event)]

    def explain(self) -> str:
        """The resolved order: one line per event with callbacks, in the order the events happen."""
        lines = [f"  {event.value}: " + ", ".join(self.order_of(event)) for event in Event if self._entries.get(event)]
        constraints = [f"{a} before {b}" for a, later in sorted(self._later.items()) for b in sorted(later)]
        text = "Plugin callbacks per event, in the order they run:\n" + "\n".join(lines)
        return text + ("\n  constraints: " + "; ".join(constraints) if constraints else "")

    def _resolve(self, event: Event) -> None:
        """``event``'s callbacks changed: sorted again when they are next needed (``_handlers``)."""
        self._stale.add(event)

    @property
    def _handlers(self) -> dict[Event, tuple[Callback, ...]]:
        """The callbacks each event runs, in order (those that changed sorted now)."""
        while self._stale:
            event = self._stale.pop()
            entries, profile = self._sorted(event), self._profile
            if profile is None:
                self._resolved[event] = tuple(e.callback for e in entries)
            else:
                self._resolved[event] = tuple(profile.timed(event.value, e.label, e.callback) for e in entries)
        return self._resolved

    def _sorted(self, event: Event) -> list[_Entry]:
        """Kahn's topological sort over the owners' constraints, taking the lowest (order, owner, added) that is free.

        Constraints are transitive: A before B and B before C put A before C also at an event B does not use.
        """
        entries = self._entries.get(event, [])
        waiting = {id(e): 0 for e in entries}
        for e in entries:
            for other in entries:
                if other.owner in self._reach.get(e.owner, ()) and other.owner != e.owner:
                    waiting[id(other)] += 1
        ready = [(e.order, e.owner, e.added, i) for i, e in enumerate(entries) if waiting[id(e)] == 0]
        heapq.heapify(ready)
        result = []
        while ready:
            entry = entries[heapq.heappop(ready)[3]]
            result.append(entry)
            for i, other in enumerate(entries):
                if other.owner in self._reach.get(entry.owner, ()) and other.owner != entry.owner:
                    waiting[id(other)] -= 1
                    if waiting[id(other)] == 0:
                        heapq.heappush(ready, (other.order, other.owner, other.added, i))
        return result

    def _reachable(self, owner: str) -> set[str]:
        """The owners that must run after ``owner``, directly or through others."""
        found: set[str] = set()
        todo = list(self._later.get(owner, ()))
        while todo:
            nxt = todo.pop()
            if nxt not in found:
                found.add(nxt)
                todo.extend(self._later.get(nxt, ()))
        return found

    def _cycle(self) -> list[str] | None:
        """A cycle of owners in the constraints, if there is one."""
        visiting: list[str] = []
        done: set[str] = set()

        def visit(owner: str) -> list[str] | None:
            if owner in visiting:
                return visiting[visiting.index(owner) :] + [owner]
            if owner in done:
                return None
            visiting.append(owner)
            for nxt in sorted(self._later.get(owner, ())):
                found = visit(nxt)
                if found:
                    return found
            visiting.pop()
            done.add(owner)
            return None

        for owner in sorted(self._later):
            found = visit(owner)
            if found:
                return found
        return None
