"""RETURNN's ``learning_rate_file``: each epoch's learning rate and scores, in RETURNN's own format.

The file is a Python literal that RETURNN (and its tools, e.g. ``tools/plot-lr-scores``-style
scripts) evaluate::

    {
    1: EpochData(learningRate=0.01, error={'dev_loss_ce': 0.52, 'train_loss_ce': 0.61}),
    2: EpochData(learningRate=0.01, error={'dev_loss_ce': 0.41, 'train_loss_ce': 0.5}),
    }

Score keys are RETURNN's for its PyTorch engine: ``<dataset>_loss_<name>``. Reading parses the
literal with ``ast`` instead of evaluating it, so a file cannot run code.
"""

from __future__ import annotations

import ast
import math
import os
from typing import Any, BinaryIO

from framework.base import log
from framework.base.config import Config
from framework.base.disk import describe_os_error, write_atomically
from framework.base.errors import ConfigError
from framework.base.options import register
from framework.base.safe_create import open_for_reading, refuse_special
from framework.core.events import Event, Order
from framework.core.plugin import Plugin, on
from framework.core.scores import Scores
from framework.core.state import RunState

register(
    "learning_rate_file",
    "str | None",
    None,
    "RETURNN's learning-rate file: each epoch's rate and scores in RETURNN's format, written after every epoch; "
    "a fresh training takes the rates of the epochs it lists (RETURNN's rule).",
    __name__,
)


def format_lr_file(epoch_lrs: dict[int, float], scores: dict[int, Scores]) -> str:
    """The file's text for the epochs that have a learning rate."""
    lines = ["{"]
    for epoch in sorted(epoch_lrs):
        error = {
            f"{dataset}_loss_{name}": float(value)
            for dataset, values in sorted(scores.get(epoch, {}).items())
            for name, value in values.items()
        }
        lines.append(f"{epoch}: EpochData(learningRate={float(epoch_lrs[epoch])!r}, error={error!r}),")
    lines.append("}")
    return "\n".join(lines) + "\n"


def write_lr_file(path: str, epoch_lrs: dict[int, float], scores: dict[int, Scores]) -> None:
    """Write atomically: a crash mid-write leaves the previous file, as RETURNN does."""

    def write(f: BinaryIO) -> None:
        f.write(format_lr_file(epoch_lrs, scores).encode("utf-8"))

    write_atomically(path, write, "the learning_rate_file", "Free space or point learning_rate_file elsewhere.")


def read_lr_file(path: str) -> tuple[dict[int, float], dict[int, Scores]]:
    """(learning rate per epoch, scores per epoch as ``{dataset: {loss: value}}``) from a RETURNN file."""
    try:
        with os.fdopen(open_for_reading(path, "learning_rate_file"), encoding="utf-8") as f:
            text = f.read()
    except OSError as exc:  # permissions, I/O errors (a missing file is no error: the caller checked)
        raise ConfigError(
            f"learning_rate_file {path} cannot be read ({describe_os_error(exc)}). Make it readable, or point "
            f"learning_rate_file elsewhere."
        ) from None
    try:
        tree = ast.parse(text, path, mode="eval").body
        if not isinstance(tree, ast.Dict):
            raise ValueError("the file is not a dict {epoch: EpochData(...)}")
        epoch_lrs, scores = {}, {}
        for key, value in zip(tree.keys, tree.values, strict=True):
            epoch = _literal(key)
            if not isinstance(value, ast.Call) or getattr(value.func, "id", None) != "EpochData":
                raise ValueError(f"epoch {epoch}: expected EpochData(...)")
            fields = {kw.arg: _literal(kw.value) for kw in value.keywords}
            lr = fields.get("learningRate", fields.get("learning_rate"))
            if not isinstance(epoch, int) or not isinstance(lr, float):
                raise ValueError(f"epoch {epoch!r}: needs an int epoch and a float learningRate")
            epoch_lrs[epoch] = lr
            error = fields.get("error") or {}
            if isinstance(error, float):  # RETURNN's oldest format: one score
                error = {"old_format_score": error}
            scores[epoch] = _nested(error)
    except (SyntaxError, ValueError, TypeError) as exc:
        raise ConfigError(
            f"learning_rate_file {path} is not in RETURNN's format ({exc}). Fix or move the file, or point "
            f"learning_rate_file elsewhere."
        ) from None
    return epoch_lrs, scores


def _literal(node: ast.AST) -> Any:
    """A literal, also RETURNN's ``nan``/``inf`` names and ``np.float64(x)`` wrappers."""
    if isinstance(node, ast.Name) and node.id in ("nan", "inf"):
        return math.nan if node.id == "nan" else math.inf
    if isinstance(node, ast.Call) and len(node.args) == 1 and not node.keywords:
        return _literal(node.args[0])
    if isinstance(node, ast.Dict):
        return {_literal(k): _literal(v) for k, v in zip(node.keys, node.values, strict=True)}
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        return -_literal(node.operand)
    return ast.literal_eval(node)


def _nested(error: dict[str, Any]) -> Scores:
    """RETURNN's flat keys as our ``{dataset: {loss: value}}``: ``dev_loss_ce`` and also TF's ``dev_score``."""
    nested: Scores = {}
    for key, value in error.items():
        if key.startswith(":meta:"):
            continue
        dataset, sep, loss = key.partition("_loss_")
        if not sep:
            dataset, _, loss = key.rpartition("_")
        nested.setdefault(dataset or key, {})[loss] = float(value)
    return nested


class LearningRateFile(Plugin):
    """Reads the file when a training starts fresh, writes it after every epoch (rank 0 only)."""

    order = Order.TRAINING

    def __init__(self, path: str):
        self.path = path

    @classmethod
    def from_config(cls, config: Config, state: RunState) -> LearningRateFile | None:
        path = config.get("learning_rate_file")
        if not path or config.get("task") != "train" or (state.distributed is not None and state.distributed.rank):
            return None
        refuse_special(path, "learning_rate_file")  # a directory or FIFO there: said now, not at the first epoch's end
        return cls(path)

    @on(Event.STARTUP)
    def read(self, state: RunState) -> None:
        if state.epoch > 0 or not os.path.exists(self.path):  # a resumed run follows its checkpoint
            return
        epoch_lrs, scores = read_lr_file(self.path)
        if not epoch_lrs:
            return
        state.control.continue_learning_rates(epoch_lrs, scores)
        log.v3(
            f"learning_rate_file {self.path}: epochs {min(epoch_lrs)}-{max(epoch_lrs)} train with the learning rates "
            f"it lists (RETURNN's rule); delete the file to start the schedule afresh."
        )

    @on(Event.EPOCH_END, order=Order.LAST)
    def write(self, state: RunState) -> None:
        write_lr_file(self.path, state.lr_control.epoch_lrs, state.lr_control.scores)


PLUGINS = (LearningRateFile,)
