"""The config's own callbacks: ``callbacks = {"epoch_end": fn, "close": [fn1, fn2], ...}``, and RETURNN's
``epoch_start`` / ``epoch_end`` functions.

Each ``fn(state)`` gets the run's ``RunState`` and runs before the framework's callbacks of
the same event (``Order.USER``). For more than a function or two, write a plugin instead
(docs/writing_a_diagnostic.rst): it can declare options and hold state.
"""

from __future__ import annotations

from typing import Any

from framework.base.config import Config
from framework.base.errors import ConfigError
from framework.base.options import register
from framework.base.util import accepted_kwargs
from framework.core.events import Callbacks, Event, Order
from framework.core.plugin import TASKS, Plugin, on

register(
    "epoch_start",
    "callable | None",
    None,
    "RETURNN's epoch_start(*, epoch, step, model, dataset_name, **kwargs): called before the train batches of each "
    "epoch (dataset_name 'train') and before each dev/eval dataset's batches, as RETURNN's torch engine calls it "
    "(a function without **kwargs gets the arguments it names).",
    __name__,
)
register(
    "epoch_end",
    "callable | None",
    None,
    "RETURNN's epoch_end(*, epoch, step, model, dataset_name, **kwargs): called after the train batches of each "
    "epoch (before the evaluation and the checkpoint) and after each dev/eval dataset's batches, as RETURNN's torch "
    "engine calls it.",
    __name__,
)


class UserCallbacks(Plugin):
    """Binds each function of the ``callbacks`` option to its event."""

    tasks = TASKS

    def __init__(self, bound: list[tuple[Event, Any]]):
        self.bound = bound

    @classmethod
    def from_config(cls, config: Config, state: Any) -> UserCallbacks | None:
        names = {event.value: event for event in Event}
        bound = []
        for name, fns in (config.get("callbacks") or {}).items():
            if name not in names:
                raise ConfigError(f"callbacks: unknown event {name!r}; events are {', '.join(names)}.")
            for fn in fns if isinstance(fns, (list, tuple)) else [fns]:
                if not callable(fn):
                    raise ConfigError(
                        f"callbacks[{name!r}] must be a function fn(state) or a list of them, got {fn!r}."
                    )
                bound.append((names[name], fn))
        return cls(bound) if bound else None

    def subscribe(self, callbacks: Callbacks) -> None:
        self.callbacks = callbacks
        for event, fn in self.bound:
            callbacks.on(event, fn, Order.USER)


class ReturnnEpochFunctions(Plugin):
    """RETURNN's ``epoch_start`` and ``epoch_end`` where its torch engine calls them (returnn/torch/engine.py,
    ``_on_epoch_start``/``_on_epoch_end``): around an epoch's train batches with ``dataset_name="train"``, then
    around each evaluated dataset's batches with its name (also in task ``eval``); ``epoch`` and ``step`` (the global
    train step) as then, ``model`` the model itself (not a distributed wrapper). ``epoch_end`` of the training comes
    before the evaluation, as in RETURNN, where the engine here has no event of its own: at the first evaluation's
    start, or at the epoch's end without one. With several processes the evaluations' calls are rank 0's only, as
    RETURNN evaluates on rank 0 only."""

    tasks = ("train", "eval")
    ARGUMENTS = ("epoch", "step", "model", "dataset_name")

    def __init__(self, start: Any, end: Any):
        self.functions = {"epoch_start": start, "epoch_end": end}
        self.training = False  # the epoch's train batches ran and its epoch_end("train") is still due

    @classmethod
    def from_config(cls, config: Config, state: Any) -> ReturnnEpochFunctions | None:
        start, end = config.get("epoch_start"), config.get("epoch_end")
        return cls(start, end) if start is not None or end is not None else None

    def _call(self, name: str, state: Any, dataset: str) -> None:
        function = self.functions[name]
        if function is None:
            return
        if dataset != "train" and state.distributed is not None and state.distributed.rank != 0:
            return
        values = {"epoch": state.epoch, "step": state.global_step, "model": state.model, "dataset_name": dataset}
        accepted = accepted_kwargs(function)
        function(**{key: value for key, value in values.items() if accepted is None or key in accepted})

    def _end_training(self, state: Any) -> None:
        if self.training:
            self.training = False
            self._call("epoch_end", state, "train")

    @on(Event.EPOCH_START, Order.USER)
    def train_start(self, state: Any) -> None:
        self.training = True
        self._call("epoch_start", state, "train")

    @on(Event.EVAL_START, Order.USER)
    def eval_start(self, state: Any) -> None:
        self._end_training(state)
        self._call("epoch_start", state, state.dataset)

    @on(Event.EVAL_END, Order.USER)
    def eval_end(self, state: Any) -> None:
        self._call("epoch_end", state, state.dataset)

    @on(Event.EPOCH_END, Order.USER)
    def epoch_end(self, state: Any) -> None:
        self._end_training(state)


PLUGINS = (UserCallbacks, ReturnnEpochFunctions)
