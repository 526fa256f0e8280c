"""Early stopping: end training when the watched score stops improving.

After each epoch (and once at startup, so that a rerun of a stopped training does not train
on), the epoch scores kept by the learning-rate control are searched for the best value of the
watched score. When ``early_stopping_patience`` epochs have passed without an improvement of
more than ``early_stopping_min_delta``, training ends after the current epoch's checkpoint; the
log names the best epoch and its checkpoint. The scores are part of every checkpoint, so the
decision survives a resume.
"""

from __future__ import annotations

from typing import Any

from framework.base.config import Config
from framework.base.options import register
from framework.core.events import Event, Order
from framework.core.plugin import Plugin, on
from framework.training import checkpoint
from framework.training.lr_control import score_key

register(
    "early_stopping_patience",
    "int | None",
    None,
    "End training when the watched score did not improve for this many epochs (None: never).",
    __name__,
    range="[0, inf)",
)

register(
    "early_stopping_error_measure",
    "str | None",
    None,
    "Score that early stopping watches, e.g. 'dev_ce'; None: the learning-rate control's (first dev loss).",
    __name__,
)

register(
    "early_stopping_min_delta",
    "float",
    0.0,
    "Early stopping: an improvement must be larger than this.",
    __name__,
    range="[0, inf)",
)


class EarlyStopping(Plugin):
    """Decides from ``state.lr_control.scores`` whether training should end.

    It keeps no state of its own (``state_dict`` is None): the scores it decides from are in every checkpoint,
    so a resumed run counts the epochs without improvement from where the interrupted one was.
    """

    order = Order.CHECK

    def __init__(self, patience: int, measure: str | None, min_delta: float):
        self.patience = patience
        self.measure = measure
        self.min_delta = min_delta

    @classmethod
    def from_config(cls, config: Config, state: Any) -> EarlyStopping | None:
        patience = config.get("early_stopping_patience")
        if patience is None:
            return None
        return cls(patience, config.get("early_stopping_error_measure"), config.float("early_stopping_min_delta"))

    @on(Event.STARTUP)
    @on(Event.EPOCH_END)
    def check(self, state: Any) -> None:
        scores = state.lr_control.scores
        if not scores:
            return
        dataset, loss = score_key(scores[max(scores)], self.measure, "early_stopping_error_measure")
        history = [(epoch, s[dataset][loss]) for epoch, s in sorted(scores.items()) if loss in s.get(dataset, {})]
        best_epoch, best = history[0]
        for epoch, value in history[1:]:
            if value < best - self.min_delta:
                best_epoch, best = epoch, value
        last_epoch = history[-1][0]
        if last_epoch - best_epoch < self.patience:
            return
        prefix = state.config.get("model")
        where = f"; its checkpoint is {checkpoint.checkpoint_path(prefix, best_epoch)}" if prefix else ""
        state.control.end_training(
            f"early stopping: {dataset}_{loss} has not improved by more than {self.min_delta:g} for "
            f"{last_epoch - best_epoch} epochs (patience {self.patience}); the best was {best:.4g} at epoch "
            f"{best_epoch}{where}"
        )


PLUGINS = (EarlyStopping,)
