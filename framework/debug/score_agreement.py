"""Do the loss and the error rate tell the same story? (``debug_score_agreement``, on by default.)

A cross-entropy and the error rate of the same predictions are two measurements of one thing: as the mean
cross-entropy falls, the share of wrong argmax predictions must fall with it. The losses judged are those with a
chance level (cross-entropies over class labels, ``CHANCE_LEVELS``). By Markov's inequality, a mean
cross-entropy ``L`` (nats) allows at most ``L / ln 2`` of the predictions to give the target a probability of 1/2 or
less, so at most that share can be wrong. After each epoch's evaluation, a dev error that stays where it was at the
first training step (before any update) while the dev loss fell to half of its own first-step value or less, and that
exceeds that bound, means the two scores do not measure the same predictions: the error is computed on something
else (the argmax of a flattened tensor, positions the loss ignores, labels in another order). This is a warning
with the numbers, naming the error, once per run. Errors that are not about the predictions the loss scores (a
sequence error over token losses falls with them, so it does not stay) pass.
"""

from __future__ import annotations

import math

from framework.base.config import Config
from framework.base.findings import Finding, report
from framework.base.options import register
from framework.core.events import Event, Order
from framework.core.measurements import CHANCE_LEVELS
from framework.core.plugin import Plugin, on
from framework.core.scores import step_values
from framework.core.state import RunState

CHECK = "score agreement"
register(
    "debug_score_agreement",
    "bool",
    True,
    "After each evaluation: warn when a dev error stays at its first-step value while the dev loss falls.",
    __name__,
)

FELL = 0.5  # the dev loss at most this fraction of its first-step value: the model learned
STAYED = 0.05  # an error within this of its first-step value (or above it) did not fall
MARGIN = 0.05  # above the Markov bound by this much


class ScoreAgreement(Plugin):
    """Keeps the first training step's scores; judges dev's after each epoch."""

    order = Order.REPORT
    needs = (CHANCE_LEVELS,)  # the cross-entropies over class labels: the losses the bound is about

    def __init__(self) -> None:
        self.first: dict[str, float] | None = None  # the first step's scores (train mode, before any update)
        self.errors: set[str] = set()
        self.reported = False

    @classmethod
    def from_config(cls, config: Config, state: RunState) -> ScoreAgreement | None:
        return cls() if state.task == "train" and config.bool("debug_score_agreement") else None

    @on(Event.STEP_END, once=True)
    def keep_first(self, state: RunState) -> None:
        if state.run_ctx is None or state.global_step != 1:  # a resumed run has no first step to compare with
            return
        self.first = step_values(state.run_ctx)
        self.errors = {name for name, marked in state.run_ctx.losses.items() if marked.as_error}

    @on(Event.EPOCH_END)
    def judge(self, state: RunState) -> None:
        if self.first is None or self.reported or not self.errors:
            return
        dev = state.eval_scores.get("dev") or next(iter(state.eval_scores.values()), None)
        if not dev:
            return
        levels = state.store.get(CHANCE_LEVELS) or {}
        losses = [n for n in levels if n in self.first and n in dev and self.first[n] > 0]
        learned = [n for n in losses if dev[n] <= FELL * self.first[n]]
        for error in sorted(self.errors & set(dev)):
            for loss in learned:
                bound = dev[loss] / math.log(2)
                if dev[error] >= self.first[error] - STAYED and dev[error] > bound + MARGIN:
                    report(self._finding(state, error, loss, dev, bound))
                    self.reported = True
                    return

    def _finding(self, state: RunState, error: str, loss: str, dev: dict[str, float], bound: float) -> Finding:
        first = self.first or {}
        return Finding(
            "warning",
            CHECK,
            f"the error {error!r} does not follow the loss {loss!r}: on dev after epoch {state.epoch}, {loss} fell from "
            f"{first[loss]:.4g} (the first training step) to {dev[loss]:.4g}, but {error} is {dev[error]:.4g} "
            f"(first step: {first[error]:.4g}). If {error!r} counted the argmax mistakes of the predictions {loss!r} "
            f"scores, a mean cross-entropy of {dev[loss]:.4g} would allow at most {min(bound, 1):.3g} of them "
            f"(Markov's inequality: {dev[loss]:.4g} / ln 2). The error metric measures something else: look at how "
            f"train_step computes it (argmax over the class axis, the positions it counts, the labels it compares "
            f"with).",
            evidence={
                "epoch": state.epoch,
                "loss": {"first_step": first[loss], "dev": dev[loss]},
                "error": {"first_step": first[error], "dev": dev[error]},
                "bound": bound,
            },
            where={"score": error, "loss": loss},
            fix=f"Compute {error!r} from the predictions {loss!r} scores, e.g. (logits.argmax(dim=-1) != targets) "
            f"over the real positions, and mark it with as_error=True.",
            option="debug_score_agreement = False",
        )


PLUGINS = (ScoreAgreement,)
