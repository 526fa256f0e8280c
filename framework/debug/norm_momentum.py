"""Running statistics that average nothing (``debug_norm_momentum``, on by default).

A batch norm keeps running statistics for evaluation: after each training batch,
``running = (1 - momentum) * running + momentum * batch``, an average over about ``1 / momentum`` batches
(torch's default 0.1: the last ten or so). TensorFlow and Keras write the same average with ``momentum``
weighting the old value (their default 0.99), and a value copied from there weights the newest batch
instead: with momentum 0.99 the statistics every evaluation normalises with are those of the last training
batch, with all its sampling noise, and dev scores move with whichever batch came last.

Configured against applied, at startup (no step runs): each batch norm that tracks running statistics with a
momentum above one half, an average over fewer than two batches, is reported with the window it gives.
``momentum=None`` (a cumulative average) and the default are never reported.
"""

from __future__ import annotations

from torch import nn

from framework.base.config import Config
from framework.base.findings import Finding, report
from framework.base.options import register
from framework.core.events import Event
from framework.core.plugin import Plugin, on
from framework.core.state import RunState

register(
    "debug_norm_momentum",
    "bool",
    True,
    "At startup: a batch norm whose momentum (torch's: the weight of the newest batch) is above 0.5, so that its "
    "running statistics are those of the last batch or two (TensorFlow's momentum is the weight of the old value).",
    __name__,
)

HIGHEST = 0.5  # above it the running statistics average fewer than two batches


class NormMomentum(Plugin):
    """Reports batch norms whose running statistics are those of the last batch or two."""

    bug_check = ("debug_norm_momentum",)

    @classmethod
    def from_config(cls, config: Config, state: RunState) -> NormMomentum | None:
        return cls() if config.bool("debug_norm_momentum") else None

    @on(Event.STARTUP)
    def find(self, state: RunState) -> None:
        found = [
            (name, module)
            for name, module in state.model.named_modules()
            if isinstance(module, nn.modules.batchnorm._NormBase)
            and module.track_running_stats
            and module.momentum is not None
            and module.momentum > HIGHEST
        ]
        if not found:
            return
        name, module = found[0]
        more = f" (also: {', '.join(repr(n) for n, _ in found[1:4])})" if len(found) > 1 else ""
        m = module.momentum
        report(
            Finding(
                "warning",
                "sanity check",
                f"{type(module).__name__} {name!r} has momentum={m:g}{more}: torch's momentum is the weight of the "
                f"newest batch in the running statistics, so they average about {1 / m:.2g} batch(es): every "
                f"evaluation normalises with the statistics of the last training batch, noise included. TensorFlow "
                f"and Keras weight the old value with their momentum; their {m:g} is torch's {1 - m:.2g}. Use "
                f"momentum={1 - m:.2g} (or None for a cumulative average).",
                evidence={"momentum": m, "batches_averaged": 1 / m, "modules": [n for n, _ in found]},
                where={"module": name},
                fix=f"momentum={1 - m:.2g}",
                option="debug_norm_momentum = False",
            )
        )


PLUGINS = (NormMomentum,)
