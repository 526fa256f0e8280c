"""The keys of the measurements that plugins share through ``state.store`` (``framework.core.store``).

Each key has one producer, which declares it in ``provides``; its consumers declare it in ``needs``.
"""

from __future__ import annotations

from dataclasses import dataclass

from framework.core.store import Key


@dataclass
class ChanceLevel:
    """The value a loss has when the model uses nothing of its input, e.g. by predicting the label frequencies."""

    value: float
    what: str  # e.g. "the entropy of the label frequencies of 'classes' in train"


CHANCE_LEVELS: Key[dict[str, ChanceLevel]] = Key("chance_levels", "loss name -> its level without input")
LOSS_FLOORS: Key[dict[str, float]] = Key("loss_floors", "loss name -> the least it can reach (soft targets)")
UPDATE_RATIO: Key[float] = Key("update_ratio", "the largest |dW|/|W| of a weight at the latest gradient-health check")
EAGER_ONLY: Key[str] = Key("eager_only", "why the model must not be compiled (a check hooks into every step)")
VERDICT_RUN: Key[str] = Key("verdict_run", "the verdict option this run is for; its findings must not stop it")
