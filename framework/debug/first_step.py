"""The first-step probe session (``debug_first_step_reruns``, on by default).

Before the first training step, the checks that look at the first batch by running ``train_step``
again (loss inputs, padding, batch independence, device) share one ``ProbeSession``
(``framework.inspection.probe``): every such run happens on a fresh copy of the model, the run on
the unchanged batch once for all of them. With default options on a batch without padding, that
is 2 extra runs (the unchanged batch, also watched by the device check; a smaller batch); padding adds an unchanged
and a changed-padding run in eval mode (and one per padded key when a loss moves). At verbosity 4
one line counts them and says what could not be checked. ``debug_first_step_reruns = False`` turns
every one of them off.
"""

from __future__ import annotations

from framework import log
from framework.config import Config
from framework.core.events import Event, Order
from framework.core.measurements import PROBE_SESSION
from framework.core.plugin import Plugin, on
from framework.core.state import RunState
from framework.inspection.probe import ProbeSession
from framework.options import register

register(
    "debug_first_step_reruns",
    "bool",
    True,
    "Before the first step, checks rerun train_step on copies of the model (loss inputs, padding, batch "
    "independence, device); False turns every rerun off.",
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

    @on(Event.AFTER_FORWARD, once=True)
    def close_session(self, state: RunState) -> None:
        """After the real first forward: log what the checks ran, and let go of the session's tensors."""
        if self.session is not None:
            log.v4(f"First-step checks: {self.session.summary()}.")
            self.session.release()
            state.store.put(PROBE_SESSION, None, by=self)
            self.session = None


PLUGINS = (FirstStepProbes,)
