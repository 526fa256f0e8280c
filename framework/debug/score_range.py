"""Can the scores a softmax loss gets ever express a choice? (``debug_score_range``, on by default.)

``cross_entropy`` turns scores into a softmax over the classes. Scores confined to a width ``w`` (the largest
minus the smallest of a row) give each class at least ``1 / (1 + (C - 1) e^w)``: the loss cannot fall below
``log(1 + (C - 1) e^-w)``, and where that is near ``log C`` the softmax stays nearly uniform whatever the model
learns. A contrastive loss whose cosine similarities are multiplied by the temperature instead of divided by it
(``sim * 0.07``: a width of at most 0.14) trains, slowly, on a loss that barely moves.

Small scores at initialisation are normal; scores bounded by construction are not. In the probe session's run of
the first batch the rows of each ``cross_entropy`` call are measured; only where their width keeps the loss's
floor above ``NEAR_UNIFORM`` of ``log C`` is an experiment run on a copy: every parameter multiplied by ten. The
scores of an ordinary model grow with its weights; scores that stay as narrow are bounded by the model's own
computation (a normalisation followed by a small factor), and that is reported with the floor it sets.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.nn.functional as F
from torch.overrides import TorchFunctionMode

from framework.base.config import Config
from framework.base.errors import ModelCheckError
from framework.base.findings import Finding
from framework.base.options import register
from framework.check_library.tensors import format_frame, user_frame
from framework.core.run_ctx import RunCtx
from framework.core.state import RunState
from framework.debug.first_step import SharedRunCheck, run_scaled_copy
from framework.debug.sanity import report_findings

CHECK = "score-range check"
OFF = "debug_score_range = False"

register(
    "debug_score_range",
    "bool",
    True,
    "First step: the scores of a cross_entropy bounded by construction to so narrow a range that the softmax stays "
    "nearly uniform (a temperature applied the wrong way); tested by scaling a copy's parameters.",
    __name__,
)

NEAR_UNIFORM = 0.9  # a loss floor at this share of log C leaves the softmax nearly uniform
GROWTH = 1.5  # scores of a copy with ten times the weights at most this much wider are bounded by construction
SCALE = 10.0


@dataclass
class _Scores:
    """Per cross_entropy call site: the widest row of its scores, its number of classes."""

    widths: dict[str, tuple[float, int]] = field(default_factory=dict)


class _ScoreWatch(TorchFunctionMode):
    def __init__(self, scores: _Scores):
        super().__init__()
        self.scores = scores

    def __torch_function__(self, func: Any, types: Any, args: tuple = (), kwargs: dict | None = None) -> Any:
        kwargs = kwargs or {}
        if func is F.cross_entropy and args and isinstance(args[0], torch.Tensor) and args[0].dim() >= 2:
            scores = args[0].detach().float()
            rows = scores.movedim(1, -1).reshape(-1, scores.shape[1])
            width = float((rows.amax(1) - rows.amin(1)).max()) if rows.numel() else math.inf
            where = format_frame(user_frame())
            previous = self.scores.widths.get(where, (0.0, rows.shape[1]))
            self.scores.widths[where] = (max(previous[0], width), rows.shape[1])
        return func(*args, **kwargs)


def loss_floor(width: float, classes: int) -> float:
    """The least cross-entropy a softmax over ``classes`` scores of at most ``width`` apart can reach."""
    return math.log1p((classes - 1) * math.exp(-width))


def _near_uniform(width: float, classes: int) -> bool:
    return classes > 1 and loss_floor(width, classes) >= NEAR_UNIFORM * math.log(classes)


class ScoreRange(SharedRunCheck):
    """Measures the scores of the first batch's cross_entropy calls; tests narrow ones on a scaled copy."""

    bug_check = ("debug_score_range",)

    check = CHECK

    @classmethod
    def from_config(cls, config: Config, state: RunState) -> ScoreRange | None:
        return cls() if config.bool("debug_score_range") else None

    @contextlib.contextmanager
    def observe(self, state: RunState, model: torch.nn.Module) -> Iterator[_Scores]:
        scores = _Scores()
        with _ScoreWatch(scores):
            yield scores

    def conclude(self, state: RunState, seen: _Scores, run_ctx: RunCtx | None) -> None:
        narrow = {where: wc for where, wc in seen.widths.items() if _near_uniform(*wc)}
        if not narrow:
            return
        scaled = _Scores()
        if not run_scaled_copy(state, CHECK, SCALE, _ScoreWatch(scaled)):
            return
        findings = []
        for where, (width, classes) in narrow.items():
            grown = scaled.widths.get(where, (math.inf, classes))[0]
            if grown > GROWTH * max(width, 1e-6):
                continue  # small at initialisation only: the scores grow with the weights
            floor, uniform = loss_floor(max(width, grown), classes), math.log(classes)
            findings.append(
                Finding(
                    "warning",
                    "sanity check",
                    f"The scores cross_entropy at {where} gets span at most {width:.3g} within a row (over the first "
                    f"batch), and still {grown:.3g} when every parameter of a copy of the model is multiplied by "
                    f"{SCALE:g}: they are bounded by the model's own computation, so the softmax over their {classes} "
                    f"classes stays nearly uniform. Even a perfect ranking gives a loss of at least {floor:.4g}, "
                    f"against {uniform:.4g} for a uniform guess, and its gradients stay small. Typical cause: a "
                    f"temperature or scale applied the wrong way (normalised similarities multiplied by a temperature "
                    f"below 1 where dividing by it was meant), or a normalisation after the last layer without a "
                    f"scale.",
                    evidence={"score_width": width, "with_scaled_weights": grown, "classes": classes, "floor": floor},
                    where={"line": where},
                    fix="divide the normalised scores by the temperature (or multiply them by a scale above 1)",
                    option=OFF,
                )
            )
        report_findings(state, "first step", findings, ModelCheckError, False, off=OFF)


PLUGINS = (ScoreRange,)
