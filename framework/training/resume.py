"""What changed since the checkpoint a run resumes from: one log line per option, and the value used.

Checkpoints record the run's option values (those that are plain data). A resumed run uses the
current config's values, with one exception, RETURNN's rule: the learning rates already decided
are part of the training state in the checkpoint and win over a changed ``learning_rate`` or
``learning_rates``. ``resume_learning_rate = "config"`` (or ``++resume_learning_rate config``)
restarts the schedule at the config's rate from the resumed epoch on.
"""

from __future__ import annotations

from typing import Any

from framework.base import log, options
from framework.base.config import Config
from framework.training.lr_control import LearningRateControl

_LEARNING_RATE_OPTIONS = ("learning_rate", "learning_rates")
# Never worth a line: how this particular process runs, not what it trains.
_NOT_REPORTED = {
    "config",
    "task",
    "resume_learning_rate",
    "log",
    "log_verbosity",
    "checkpoint_every_n_steps",
    "checkpoint_every_n_minutes",
    "requeue_signal",
    "requeue_command",
}


def recorded_options(config: Config) -> dict[str, Any]:
    """The registered options' values that a checkpoint can store (plain data: numbers, strings, lists, dicts)."""
    recorded = {}
    for option in options.all_options():
        value = config.get(option.name)
        if option.name not in _NOT_REPORTED and _is_plain(value):
            recorded[option.name] = value
    return recorded


def _is_plain(value: Any) -> bool:
    if value is None or isinstance(value, (bool, int, float, str)):
        return True
    if isinstance(value, (list, tuple)):
        return all(_is_plain(v) for v in value)
    if isinstance(value, dict):
        return all(isinstance(k, str) and _is_plain(v) for k, v in value.items())
    return False


def report_changes(config: Config, saved: dict[str, Any], lr_control: LearningRateControl, epoch: int) -> None:
    """Log each option that differs from ``saved`` (a checkpoint's), and apply ``resume_learning_rate``.

    ``epoch`` is the epoch the resumed run trains next.
    """
    before = saved.get("options")
    if before is None:
        log.v4("The checkpoint does not record its options (written by an older version): changes are not listed.")
        return
    now = recorded_options(config)
    use_config_rate = config.get("resume_learning_rate") == "config"
    for name in sorted(set(before) | set(now)):
        old, new = before.get(name, _default(name)), now.get(name, _default(name))
        if _same(old, new):
            continue
        if name in _LEARNING_RATE_OPTIONS and not use_config_rate:
            used = (
                f"the checkpoint's learning-rate state wins (epoch {epoch}: {lr_control.learning_rate(epoch):g}); "
                f"add ++resume_learning_rate config to use the new value"
            )
        else:
            used = f"using {_short(new)}"
        log.v3(f"Option {name} changed since the checkpoint: {_short(old)} there, {_short(new)} now; {used}.")
    if use_config_rate:
        lr_control.restart_at(epoch)
        log.v3(
            f"resume_learning_rate = 'config': epoch {epoch} starts at learning rate {lr_control.learning_rate(epoch):g}."
        )


def _default(name: str) -> Any:
    option = options.get(name)
    return None if option is None else option.default


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    numbers = isinstance(a, (int, float)) and isinstance(b, (int, float))
    return (type(a) is type(b) or numbers) and a == b


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 100 else text[:97] + "..."
