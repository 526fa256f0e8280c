"""RETURNN's ``cleanup_old_models``: after each epoch checkpoint, delete the ones nobody will want.

Kept, as in RETURNN: the last ``keep_last_n`` (2) epochs, the best ``keep_best_n`` (4) epochs of
every score (train and dev losses alike; a score that is the same in every epoch is ignored), the
epochs in ``keep``, and by default a sparse pattern of milestones (every 4th epoch up to 10 epochs,
every 20th up to 50, ... plus 5, 10, 20, 40, ...), so that a long training keeps a few early models.
"""

from __future__ import annotations

import itertools
import os

from framework.base import log
from framework.base.config import Config
from framework.base.errors import ConfigError
from framework.base.options import register
from framework.core.events import Event, Order
from framework.core.plugin import Plugin, on
from framework.core.scores import Scores
from framework.core.state import RunState
from framework.training import checkpoint

register(
    "cleanup_old_models",
    "bool | dict",
    False,
    "RETURNN's checkpoint cleanup after each epoch: True, or {'keep_last_n': 2, 'keep_best_n': 4, 'keep': [epochs]}.",
    __name__,
)

_KEYS = {"keep_last_n": 2, "keep_best_n": 4, "keep": None}


def milestones(last_epoch: int) -> set[int]:
    """RETURNN's default ``keep`` pattern for a training whose newest checkpoint is ``last_epoch``."""
    if last_epoch <= 10:
        every, doubles_of = 4, 5
    elif last_epoch <= 50:
        every, doubles_of = 20, 5
    elif last_epoch <= 100:
        every, doubles_of = 40, 10
    else:
        every, doubles_of = 80 * _next_power_of_two(1 + last_epoch // 240), 20
    kept = set(range(every, last_epoch + 1, every))
    kept.update(itertools.takewhile(lambda n: n <= last_epoch, (doubles_of * 2**i for i in itertools.count())))
    return kept


def _next_power_of_two(n: int) -> int:
    return 1 << (n - 1).bit_length()


def epochs_to_keep(
    epochs: list[int], scores: dict[int, Scores], keep_last_n: int, keep_best_n: int, keep: set[int] | None
) -> set[int]:
    """Which of the stored ``epochs`` stay (all of them while there are few)."""
    if max(keep_last_n, keep_best_n) >= len(epochs):
        return set(epochs)
    kept = set(milestones(epochs[-1]) if keep is None else keep) | set(epochs[-keep_last_n:])
    keys = {(d, n) for epoch in epochs for d, values in scores.get(epoch, {}).items() for n in values}
    for dataset, name in keys:
        values = {e: scores[e][dataset][name] for e in epochs if name in scores.get(e, {}).get(dataset, {})}
        if len(set(values.values())) <= 1:
            continue  # the same in every epoch: says nothing about which is best
        worst = max(values.values())
        ranked = sorted(epochs, key=lambda e: (values.get(e, worst), e))
        kept.update(ranked[:keep_best_n])
    return kept & set(epochs)


class CleanupOldModels(Plugin):
    """Deletes epoch checkpoints after each new one (rank 0 writes checkpoints, so only it deletes)."""

    order = Order.LAST

    def __init__(self, prefix: str, keep_last_n: int, keep_best_n: int, keep: set[int] | None):
        self.prefix = prefix
        self.keep_last_n, self.keep_best_n, self.keep = keep_last_n, keep_best_n, keep

    @classmethod
    def from_config(cls, config: Config, state: RunState) -> CleanupOldModels | None:
        value = config.get("cleanup_old_models")
        if not value or not config.get("model") or config.get("task") != "train":
            return None
        opts = dict(_KEYS, **value) if isinstance(value, dict) else dict(_KEYS)
        unknown = sorted(set(opts) - set(_KEYS))
        last_n, best_n, keep = opts["keep_last_n"], opts["keep_best_n"], opts["keep"]
        if (
            unknown
            or not (isinstance(last_n, int) and last_n >= 1)
            or not (isinstance(best_n, int) and best_n >= 0)
            or not (keep is None or (isinstance(keep, (list, tuple, set)) and all(isinstance(e, int) for e in keep)))
        ):
            raise ConfigError(
                f"cleanup_old_models = {value!r}: give True or a dict with keep_last_n (int >= 1, default 2), "
                f"keep_best_n (int >= 0, default 4) and keep (a list of epochs), as in RETURNN"
                + (f"; unknown keys {unknown}." if unknown else ".")
            )
        return cls(config.get("model"), last_n, best_n, None if keep is None else set(keep))

    @on(Event.CHECKPOINT_SAVED)
    def cleanup(self, state: RunState) -> None:
        stored = checkpoint.list_checkpoints(self.prefix)
        kept = epochs_to_keep(list(stored), state.lr_control.scores, self.keep_last_n, self.keep_best_n, self.keep)
        removed = [e for e in stored if e not in kept]
        for epoch in removed:
            os.remove(stored[epoch])
        if removed:
            log.v3(f"cleanup_old_models: deleted the checkpoints of epochs {removed}; kept {sorted(kept)}.")


PLUGINS = (CleanupOldModels,)
