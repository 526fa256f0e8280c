"""``debug_amp_check``: at the first training step under autocast, where mixed precision breaks.

The diagnosis itself (each module against its float32 twin) is ``framework.check_library.precision``.
"""

from __future__ import annotations

from framework.base import log
from framework.base.config import Config
from framework.base.options import register
from framework.check_library.precision import diagnose_step
from framework.core.events import Event, Order
from framework.core.plugin import Plugin, on
from framework.core.state import RunState

register(
    "debug_amp_check",
    "bool",
    False,
    "Under torch_amp, at the first step: run each module again in float32 and report overflows and the modules "
    "that lose the most precision.",
    __name__,
)


class AmpCheck(Plugin):
    """``debug_amp_check``: at the first training step under autocast, compare every module with float32."""

    tasks = ("train",)
    order = Order.OBSERVE

    @classmethod
    def from_config(cls, config: Config, state: RunState) -> AmpCheck | None:
        return cls() if config.bool("debug_amp_check") and state.precision is not None else None

    @on(Event.AFTER_BACKWARD, once=True)
    def check(self, state: RunState) -> None:
        log.v2(f"Mixed precision check at step {state.global_step} (debug_amp_check):\n{diagnose_step(state).format()}")


PLUGINS = (AmpCheck,)
