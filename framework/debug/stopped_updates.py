"""A learning rate that reached 0 after the run trained (``debug_stopped_updates``, on by default).

A schedule can end the updates long before the run ends: a step decay whose factor is 0 (``gamma=0`` where 1 meant
"off"), a factor function that returns 0 past some epoch, a scheduler stepped far more often than planned. The loss
then stays where it is, and nothing says why: a flat curve is also what a converged model shows. The rates the
optimizer applied are recorded at every update (``APPLIED_LEARNING_RATES``); an epoch in which every update of every
parameter group applied exactly 0, after an epoch that applied more, is a warning, once. A rate that is small but
not 0 is a schedule's business (a decay to a small floor, newbob after many halvings) and is not judged here.
"""

from __future__ import annotations

from framework.base.config import Config
from framework.base.findings import Finding, report
from framework.base.options import register
from framework.core.events import Event
from framework.core.measurements import APPLIED_LEARNING_RATES
from framework.core.plugin import Plugin, on
from framework.core.state import RunState

register(
    "debug_stopped_updates",
    "bool",
    True,
    "At the end of each epoch: warn when every update of the epoch applied a learning rate of 0 after an earlier "
    "epoch applied more (a schedule that ended the updates).",
    __name__,
)


# Its own problem: a rate of 0 from the start (another record, at startup) folds nothing of a stop after training
STOPPED = "a schedule ended the updates (a learning rate of 0 after training)"


class StoppedUpdates(Plugin):
    """Warns once when an epoch's updates all applied a learning rate of 0 after earlier ones trained."""

    needs = (APPLIED_LEARNING_RATES,)

    def __init__(self, num_epochs: int):
        self.num_epochs = num_epochs
        self.warned = False

    @classmethod
    def from_config(cls, config: Config, state: RunState) -> StoppedUpdates | None:
        return cls(config.int("num_epochs")) if config.bool("debug_stopped_updates") else None

    @on(Event.EPOCH_END)
    def judge(self, state: RunState) -> None:
        applied = state.store.get(APPLIED_LEARNING_RATES) or {}
        now = applied.get(state.epoch)
        trained = {epoch: rates[2] for epoch, rates in applied.items() if epoch < state.epoch and rates[2] > 0}
        if self.warned or now is None or now[2] != 0 or not trained:
            return
        self.warned = True
        last = max(trained)
        left = self.num_epochs - state.epoch
        rest = f"; the {left} epochs left will not change it either unless the schedule raises the rate" if left else ""
        report(
            Finding(
                "warning",
                "learning watch",
                f"The learning rate applied was 0 in every update of epoch {state.epoch} (up to {trained[last]:g} in "
                f"epoch {last}): the updates stopped, and the loss stays where it is{rest}. A schedule ended them: a "
                f"step decay whose factor is 0 (gamma=0 where 1 means no decay), a factor that becomes 0 past some "
                f"epoch, or a scheduler stepped more often than planned.",
                evidence={
                    "epoch": state.epoch,
                    "highest_before": trained[last],
                    "epoch_of_it": last,
                    "problem": STOPPED,
                },
                where={"option": "learning rate schedule"},
                fix="Make the schedule keep a rate above 0 until the run ends (a decay factor of 1 for no decay).",
                option="debug_stopped_updates = False",
            )
        )


PLUGINS = (StoppedUpdates,)
