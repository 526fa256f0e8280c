"""The first-step probe session (``debug_first_step_reruns``, on by default).

Before the first training step, the checks that look at the first batch by running ``train_step``
again (loss inputs, padding, batch independence, device, target leakage, unregistered parameters,
eval mode) share one ``ProbeSession`` (``framework.check_library.probe``): every such run happens on
a fresh copy of the model, the run on the unchanged batch once for all of them. With default
options on a batch without padding, that is about 10 extra runs (the unchanged batch, watched by several
checks; a smaller batch; a few sequences in eval mode; some sequences together and in two halves, in eval
mode; the batch as dev is evaluated, watched and with perfect scores); padding adds an unchanged and a
changed-padding run in eval mode (and one per padded key when a loss moves). At verbosity 4 one
line counts them and says what could not be checked. ``debug_first_step_reruns = False`` turns
every one of them off.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any, ClassVar

import torch

from framework.base import log
from framework.base.config import Config
from framework.base.options import register
from framework.check_library.probe import PROBE_SESSION, ProbeLimit, ProbeSession, replace_parameters
from framework.core.events import Event, Order
from framework.core.plugin import Plugin, on
from framework.core.run_ctx import RunCtx
from framework.core.state import RunState

register(
    "debug_first_step_reruns",
    "bool",
    True,
    "Before the first step, checks rerun train_step on copies of the model (loss inputs, padding, batch "
    "independence, device, target leakage, eval mode); False turns every rerun off.",
    __name__,
)


class FirstStepProbes(Plugin):
    """Opens the probe session before the first step and closes it after the real first forward."""

    order = Order.CHECK
    provides = (PROBE_SESSION,)

    def __init__(self, enabled: bool):
        self.enabled = enabled
        self.session: ProbeSession | None = None

    @classmethod
    def from_config(cls, config: Config, state: RunState) -> FirstStepProbes:
        return cls(config.bool("debug_first_step_reruns"))

    @on(Event.STEP_START, once=True)
    def open_session(self, state: RunState) -> None:
        """Before the checks of the first step: publish the session (or say, once, that reruns are off)."""
        if not self.enabled:
            log.v4(
                "First-step checks that rerun train_step (loss inputs, padding, batch independence, device) are off "
                "(debug_first_step_reruns = False)."
            )
            return
        self.session = ProbeSession(state)
        state.store.put(PROBE_SESSION, self.session, by=self)

    @on(Event.STEP_START, Order.LAST, once=True)
    def watch_real_step(self, state: RunState) -> None:
        """After the checks: note what the real first step logs and warns, to show the rest of what the shared
        run held back after it (``HeldOutput``)."""
        if self.session is not None:
            self.session.held.watch_real_step()

    @on(Event.EXCEPTION)
    @on(Event.CLOSE)
    def show_held(self, state: RunState) -> None:
        """A first step that ended before its forward did: show what the shared run held back."""
        if self.session is not None:
            self.session.held.release()

    @on(Event.AFTER_FORWARD, once=True)
    def close_session(self, state: RunState) -> None:
        """After the real first forward: show what the shared run held back and the real step did not show, log
        what the checks ran, and let go of the session's tensors."""
        if self.session is not None:
            self.session.held.release()
            log.v4(f"First-step checks: {self.session.summary()}.")
            self.session.release()
            state.store.put(PROBE_SESSION, None, by=self)
            self.session = None


class SharedRunCheck(Plugin):
    """A first-step check that watches the probe session's run of the unchanged first batch, on the model copy.

    A subclass names its ``check`` (as the session's summary shows it) and gives ``observe``, a
    context manager entered around the run that yields what it records, and ``conclude``, which
    judges that after the run. ``applies`` says whether the check has anything to watch in this run.
    """

    order = Order.CHECK
    needs = (PROBE_SESSION,)
    check: ClassVar[str]

    def applies(self, state: RunState) -> bool:
        """Whether this run's first batch gives the check anything to watch."""
        return True

    def observe(self, state: RunState, model: torch.nn.Module) -> contextlib.AbstractContextManager[Any]:
        """Entered around the shared run on ``model`` (the copy); yields what it records."""
        raise NotImplementedError

    def conclude(self, state: RunState, seen: Any, run_ctx: RunCtx | None) -> None:
        """Judge what ``observe`` recorded (``run_ctx``: the shared run's context, with its marked losses)."""
        raise NotImplementedError

    def skipped(self, state: RunState, limit: ProbeLimit) -> None:
        """The watched run failed (``limit`` says why); by default the check says so at verbosity 5."""
        log.v5(f"The {self.check} skipped: the watched run of the first step failed ({limit}).")

    @on(Event.STEP_START, Order.TRAINING, once=True)  # before any check makes the session's shared run
    def watch_shared_run(self, state: RunState) -> None:
        session = state.store.get(PROBE_SESSION)
        self._seen: Any = None
        self._watching = session is not None and self.applies(state)
        if not self._watching:
            return

        @contextlib.contextmanager
        def observer(model: torch.nn.Module) -> Iterator[None]:
            with self.observe(state, model) as seen:
                self._seen = seen
                yield

        session.watch(self.check, observer)

    @on(Event.STEP_START, once=True)
    def judge_shared_run(self, state: RunState) -> None:
        if not self._watching:
            return
        try:
            run_ctx = state.store.get(PROBE_SESSION).shared_run(self.check)
        except ProbeLimit as exc:
            self.skipped(state, exc)
            return
        seen, self._seen = self._seen, None
        if seen is not None:  # None: the model could not be copied (the session's summary says so)
            self.conclude(state, seen, run_ctx)


def batch_key(state: RunState, tensor: torch.Tensor, sparse: bool) -> str | None:
    """The batch key (sparse, or dense) that ``tensor`` is: the same memory and shape, as the step was given it."""
    for name, key in state.extern_data.items():
        value = state.batch.get(name)
        if (key.sparse_dim is not None) != sparse or not isinstance(value, torch.Tensor) or value.shape != tensor.shape:
            continue
        if value.untyped_storage().data_ptr() == tensor.untyped_storage().data_ptr():
            return name
    return None


def run_scaled_copy(state: RunState, check: str, scale: float, watch: contextlib.AbstractContextManager) -> bool:
    """The first batch through ``train_step`` on a copy of the model in training mode whose floating parameters are
    multiplied by ``scale``, inside ``watch`` (a mode that records what the check measures); False, said at verbosity
    5, when the copy cannot run."""
    session = state.store.get(PROBE_SESSION)
    try:
        with session.isolated(check, train=True) as model, torch.no_grad():
            replace_parameters(model, lambda p: p * scale if p.is_floating_point() else None)
            with watch:
                session.changed_run(check, model, state.batch, optional=True)
    except ProbeLimit as exc:
        log.v5(f"The {check}: the copy with parameters times {scale:g} could not run ({exc}).")
        return False
    return True


PLUGINS = (FirstStepProbes,)
