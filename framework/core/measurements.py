"""The keys of the measurements that plugins share through ``state.store`` (``framework.core.store``).

Each key has one producer, which declares it in ``provides``; its consumers declare it in ``needs``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from framework.core.store import Key

if TYPE_CHECKING:
    from framework.core.state import RunState


@dataclass
class ChanceLevel:
    """The value a loss has when the model uses nothing of its input, e.g. by predicting the label frequencies."""

    value: float
    what: str  # e.g. "the entropy of the label frequencies of 'classes' in train"


CHANCE_LEVELS: Key[dict[str, ChanceLevel]] = Key("chance_levels", "loss name -> its level without input")
ERROR_CHANCE_LEVELS: Key[dict[str, ChanceLevel]] = Key(
    "error_chance_levels", "error score name -> its value when always predicting the most frequent class"
)
LOSS_FLOORS: Key[dict[str, float]] = Key("loss_floors", "loss name -> the least it can reach (soft targets)")
CONTRACT_BREACHES: Key[list[str]] = Key("contract_breaches", "what the first step's losses got against their contracts")
IGNORED_LABELS: Key[dict[str, int]] = Key("ignored_labels", "sparse key -> the ignore_index a loss over it uses")
LABEL_KEYS: Key[list[str]] = Key("label_keys", "the batch keys whose class ids the first step's losses score against")
DIAGNOSE: Key[Callable[[RunState, Any], bool]] = Key("diagnose", "runs the differential diagnosis of a symptom")
UPDATE_RATIO: Key[float] = Key("update_ratio", "the largest |dW|/|W| of a weight at the latest gradient-health check")
EAGER_ONLY: Key[str] = Key("eager_only", "why the model must not be compiled (a check hooks into every step)")
APPLIED_LEARNING_RATES: Key[dict[int, list[float]]] = Key(
    "applied_learning_rates", "epoch -> [first, lowest, highest, latest] rate the optimizer applied at its updates"
)
SPLITS_ON_TRIAL: Key[set[tuple[str, str]]] = Key(
    "splits_on_trial",
    "(dataset option, input key) whose difference from train an experiment on the learned model decides",
)
INPUT_SCALES: Key[dict[str, tuple[bool, str]]] = Key(
    "input_scales",
    "dense input key -> (its raw values reached the first learned or normalising operation of the first step, where "
    "they arrived or were changed first)",
)
FROZEN_USED: Key[frozenset[int]] = Key(
    "frozen_used", "ids of the frozen parameters whose values enter the gradient's computation in the first step's run"
)
VERDICT_RUN: Key[str] = Key("verdict_run", "the verdict option this run is for; its findings must not stop it")
