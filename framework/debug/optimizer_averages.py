"""An adaptive optimizer whose second-moment average spans under two steps (``debug_optimizer_averages``, on by
default).

Adam and its relatives divide each update by a running average of the squared gradients,
``v = beta2 * v + (1 - beta2) * g**2``, an average over about ``1 / (1 - beta2)`` steps (torch's default 0.999: the
last thousand). That average is what makes the step size adapt to how large and how noisy each entry's gradient has
been. With ``beta2`` below one half it spans under two steps: ``v`` is the last gradient squared, every entry moves by
about the learning rate whatever its gradient (sign descent), and the noise of one batch sets the direction. Libraries
that take the decay rates as ``1 - beta`` (Blocks, some ports of Lasagne code) write torch's 0.999 as 0.001, and a
value carried over from there gives exactly this.

Configured against applied, at startup (no step runs): each param group with ``betas`` whose ``beta2`` is below one
half is reported with the window it gives. ``beta1`` alone is never reported: 0 and 0.5 are standard in GANs.
"""

from __future__ import annotations

from framework.base.config import Config
from framework.base.findings import Finding, report
from framework.base.options import register
from framework.core.events import Event
from framework.core.plugin import Plugin, on
from framework.core.state import RunState

register(
    "debug_optimizer_averages",
    "bool",
    True,
    "At startup: an optimizer whose betas give a second-moment average over under two steps (beta2 < 0.5), so that "
    "each update is about the learning rate times the sign of one batch's gradient (betas given as 1 - beta?).",
    __name__,
)

LOWEST = 0.5  # below it the second-moment average spans fewer than two steps


class OptimizerAverages(Plugin):
    """Reports param groups whose second-moment average is the last gradient or two."""

    bug_check = ("debug_optimizer_averages",)

    @classmethod
    def from_config(cls, config: Config, state: RunState) -> OptimizerAverages | None:
        return cls() if config.bool("debug_optimizer_averages") else None

    @on(Event.STARTUP)
    def find(self, state: RunState) -> None:
        groups = getattr(state.optimizer, "param_groups", [])
        found = [
            (index, group)
            for index, group in enumerate(groups)
            if isinstance(group.get("betas"), tuple | list)
            and len(group["betas"]) == 2
            and float(group["betas"][1]) < LOWEST
        ]
        if not found:
            return
        index, group = found[0]
        beta1, beta2 = (float(b) for b in group["betas"])
        owner = group.get("optimizer")
        named = f"optimizer {owner!r}" if owner else "the optimizer"
        window = 1 / (1 - beta2)
        usual = f"({1 - beta1:g}, {1 - beta2:g})"
        report(
            Finding(
                "warning",
                "sanity check",
                f"{named} (param group {index}) has betas=({beta1:g}, {beta2:g}): beta2 is the weight of the old value "
                f"in the average of squared gradients that each update is divided by, so that average spans about "
                f"{window:.2g} step(s): it is the last gradient squared, and every entry moves by about the learning "
                f"rate times the sign of one batch's gradient, whatever its size and noise (torch's default 0.999 "
                f"averages about 1000 steps). Libraries that take the decay rates as 1 - beta write torch's "
                f"(0.9, 0.999) as (0.1, 0.001); if these values come from such a convention, use betas={usual}.",
                evidence={"betas": [beta1, beta2], "steps_averaged": window, "param_groups": [i for i, _ in found]},
                where={"optimizer": owner or type(state.optimizer).__name__, "param_group": index},
                fix=f"betas={usual} (beta2 near 1: 0.98 to 0.999)",
                option="debug_optimizer_averages = False",
            )
        )


PLUGINS = (OptimizerAverages,)
