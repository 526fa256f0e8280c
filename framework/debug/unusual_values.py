"""Legal but suspicious option values, warned about at startup: the run goes on, the user is told.

Values outside their range are refused when the config is validated; these are the ones that
are allowed but rarely meant: a learning rate of 0 (nothing is trained) or a batch size that
puts the whole train set into one batch (one update per epoch).
"""

from __future__ import annotations

from framework.base.config import Config
from framework.base.findings import Finding, report
from framework.check_library.schedule_trace import ZERO_RATE
from framework.core.events import Event
from framework.core.plugin import Plugin, on
from framework.core.state import RunState

CHECK = "unusual option values"


class UnusualValues(Plugin):
    """Warns once at startup about values that make training do (almost) nothing."""

    @classmethod
    def from_config(cls, config: Config, state: RunState) -> UnusualValues:
        return cls()

    @on(Event.STARTUP)
    def check(self, state: RunState) -> None:
        config = state.config
        if config.get("dynamic_learning_rate") is None and state.lr_control.learning_rate(state.epoch + 1) == 0:
            report(
                Finding(
                    "warning",
                    CHECK,
                    "the learning rate is 0: the optimizer will not change the parameters and the loss will not move. "
                    "Set 'learning_rate' (or 'learning_rates') to the rate you mean.",
                    evidence={"learning_rate": 0.0, "problem": ZERO_RATE},
                    where={"option": "learning_rate"},
                    fix="Set 'learning_rate' (or 'learning_rates') to the rate you mean.",
                )
            )
        loader = state.loaders["train"]
        plan = loader.plan(state.epoch + 1)
        num_seqs, num_batches = sum(len(batch) for batch in plan), len(plan)
        updates = -(-num_batches // config.int("accum_grad_multiple_step"))
        if updates == 1 and num_seqs > 1:
            report(
                Finding(
                    "warning",
                    CHECK,
                    f"batch_size {config.get('batch_size')} puts all {num_seqs} train sequences into one "
                    f"{'batch' if num_batches == 1 else 'accumulation window'}: one update per epoch. If that is not "
                    f"meant, batch_size counts padded frames per batch (sequences x their max length).",
                    evidence={
                        "batch_size": config.get("batch_size"),
                        "train_sequences": num_seqs,
                        "batches": num_batches,
                        "updates_per_epoch": updates,
                    },
                    where={"option": "batch_size", "dataset": "train"},
                    fix="Lower batch_size (it counts padded frames per batch: sequences x their max length).",
                )
            )


PLUGINS = (UnusualValues,)
