"""Checkpoints inside an epoch: ``checkpoint_every_n_steps`` training steps, or ``checkpoint_every_n_minutes``.

A run that dies mid-epoch (a killed rank, a preempted node, the OOM killer) otherwise loses the
whole partial epoch. These checkpoints are the one a stop request writes, ``<model>.interrupted.pt``
at an update boundary (no accumulated gradient is lost): each overwrites the previous one
atomically, the next epoch checkpoint supersedes and removes it, and a restart (the same command,
or torchrun's elastic agent) continues from it bit for bit. RETURNN has no such option in its
PyTorch engine (only ``save_interval``, in epochs), hence names of our own. The last step of an
epoch writes none: the epoch checkpoint follows it. Only rank 0 writes checkpoints; the other ranks
ask too, and do nothing.
"""

from __future__ import annotations

import time

from framework.base.config import Config
from framework.base.errors import ConfigError
from framework.base.options import register
from framework.core.events import Event
from framework.core.plugin import Plugin, on
from framework.core.state import RunState

register(
    "checkpoint_every_n_steps",
    "int | None",
    None,
    "Also write <model>.interrupted.pt inside an epoch, every N training steps (at an update boundary); a restart "
    "resumes from it bit for bit. None: epoch checkpoints only.",
    __name__,
    range="[1, inf)",
)
register(
    "checkpoint_every_n_minutes",
    "float | None",
    None,
    "Also write <model>.interrupted.pt inside an epoch when this many minutes passed since the last checkpoint.",
    __name__,
    range="(0, inf)",
)


class PeriodicCheckpoints(Plugin):
    """Asks ``state.control`` for a mid-epoch checkpoint every N steps or M minutes."""

    def __init__(self, steps: int | None, minutes: float | None):
        self.steps, self.seconds = steps, None if minutes is None else minutes * 60
        self.last = time.monotonic()  # when the newest checkpoint (epoch or mid-epoch) was asked for or written

    @classmethod
    def from_config(cls, config: Config, state: RunState) -> PeriodicCheckpoints | None:
        steps, minutes = config.get("checkpoint_every_n_steps"), config.get("checkpoint_every_n_minutes")
        if config.get("task") != "train" or (steps is None and minutes is None):
            return None
        if not config.get("model"):
            given = "checkpoint_every_n_steps" if steps is not None else "checkpoint_every_n_minutes"
            raise ConfigError(
                f"{given} is set, but 'model' is not, so there is nowhere to write checkpoints. Set 'model' to a "
                f"checkpoint prefix (e.g. model = 'output/run1/model'), or remove {given}."
            )
        if minutes is not None and getattr(state.distributed, "fsdp", None) is not None:
            raise ConfigError(
                "checkpoint_every_n_minutes cannot combine with torch_distributed's fsdp: each rank's clock would "
                "decide on its own, but gathering the shards into rank 0's checkpoint needs every rank at the same "
                "step. Use checkpoint_every_n_steps, which every rank counts alike."
            )
        return cls(steps, minutes)

    @on(Event.STARTUP)
    @on(Event.CHECKPOINT_SAVED)
    def restart_clock(self, state: RunState) -> None:
        self.last = time.monotonic()

    @on(Event.STEP_END)
    def ask(self, state: RunState) -> None:
        if state.step_in_epoch + 1 == state.steps_in_epoch:
            return
        if self.steps is not None and state.global_step % self.steps == 0:
            state.control.checkpoint(f"checkpoint_every_n_steps = {self.steps}")
        elif self.seconds is not None and time.monotonic() - self.last >= self.seconds:
            state.control.checkpoint(f"checkpoint_every_n_minutes = {self.seconds / 60:g}")
        else:
            return
        self.last = time.monotonic()


PLUGINS = (PeriodicCheckpoints,)
