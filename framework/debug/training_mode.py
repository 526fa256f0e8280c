"""A model that leaves training mode between train steps (``debug_training_mode``, on by default).

The engine calls ``model.train()`` once at each epoch's start. Code that runs between train steps (a validation in
a ``step_end`` callback, a sample generated at the end of ``train_step``, an acting loop) and calls ``model.eval()``
without switching back leaves the rest of the epoch training in eval mode: no dropout, batch norm normalising with
running statistics that those steps no longer update. Nothing fails; the dev score is worse.

Configured against applied, at every train step: the modules that compute differently in the two modes, are part
of what is trained (they got gradients in the first step; a frozen teacher did not) and are in training mode at the
epoch's first step (after the epoch-start callbacks, so batch norm frozen on purpose there is the baseline) must be
in training mode when a later step runs its forward: in eval mode at the step's start and not switched to training
mode by ``train_step`` itself (an acting loop that ends each step in eval mode and starts the next with
``model.train()`` is right). That costs one attribute read per such module and step. ``nn.Module.train`` is wrapped
while a run watches (it calls the original at once) to see the switches and remember the user's line that switched
each watched module to eval mode. A switch made inside the first step's ``train_step`` is also the eval-mode check's
(one problem, one record).
"""

from __future__ import annotations

import traceback
from dataclasses import dataclass

import torch
from torch import nn

from framework.base.config import Config
from framework.base.findings import Finding, report
from framework.base.options import register
from framework.check_library.mode_dependence import differs_by_mode, reads_training_flag, statistics_of
from framework.check_library.tensors import calling_user_frame, format_frame
from framework.core.events import Event, Order
from framework.core.plugin import Plugin, on
from framework.core.state import RunState

register(
    "debug_training_mode",
    "bool",
    True,
    "Each train step: the modules that compute differently in training and eval mode (dropout, batch norm) are "
    "still in training mode, as at the epoch's first step; a switch to eval mode between steps (a validation in a "
    "callback) is named with the line that made it.",
    __name__,
)

CHECK = "training-mode check"
OFF = "debug_training_mode = False"
PROBLEM = "a model trained in eval mode"


class _SwitchLines:
    """What ``nn.Module.train`` calls did to the modules of ``ids`` while this is installed: the user's line of the
    first switch to eval mode that no switch back followed (``lines``), and the modules switched to training mode
    since ``switched_on`` was last cleared."""

    def __init__(self) -> None:
        self.ids: set[int] = set()
        self.lines: dict[int, traceback.FrameSummary | None] = {}
        self.switched_on: set[int] = set()

    def note(self, module: nn.Module, mode: bool) -> None:
        key = id(module)
        if key not in self.ids:
            return
        if mode:
            self.lines.pop(key, None)
            self.switched_on.add(key)
        elif key not in self.lines:  # the first switch: a later one of a module in eval mode changes nothing
            self.lines[key] = calling_user_frame()

    def install(self) -> None:
        if self not in _ACTIVE:
            _ACTIVE.append(self)
        if len(_ACTIVE) == 1 and getattr(nn.Module.train, "__wrapped__", None) is None:
            nn.Module.train = _recording_train  # type: ignore[method-assign]

    def uninstall(self) -> None:
        if self in _ACTIVE:
            _ACTIVE.remove(self)
        if not _ACTIVE and nn.Module.train is _recording_train:
            nn.Module.train = _ORIGINAL_TRAIN  # type: ignore[method-assign]


# One wrapper for the process, whatever number of runs watch (runs in one process may overlap); it calls the
# original at once and tells each watching run.
_ACTIVE: list[_SwitchLines] = []
_ORIGINAL_TRAIN = nn.Module.train


def _recording_train(module: nn.Module, mode: bool = True) -> nn.Module:
    if not torch.compiler.is_compiling():  # under Dynamo a frame lookup would break the graph
        for watching in _ACTIVE:
            watching.note(module, mode)
    return _ORIGINAL_TRAIN(module, mode)


_recording_train.__doc__ = _ORIGINAL_TRAIN.__doc__
_recording_train.__wrapped__ = _ORIGINAL_TRAIN  # type: ignore[attr-defined]


@dataclass
class _Watched:
    """A module that computes differently in the two modes, and the parameters that make it part of what is
    trained: its own or those of the nearest module that contains it and holds some."""

    name: str
    module: nn.Module
    owner: list[nn.Parameter]

    @property
    def trained(self) -> bool:
        return any(p.requires_grad for p in self.owner)  # a block frozen since (progressive freezing) is not


def _owner(name: str, modules: dict[str, nn.Module]) -> list[nn.Parameter]:
    parts = name.split(".") if name else []
    for i in range(len(parts), -1, -1):
        params = list(modules[".".join(parts[:i])].parameters())
        if params:
            return params
    return []


class TrainingMode(Plugin):
    """Counts the train steps whose forward ran a mode-dependent module in eval mode that was in training mode at
    the epoch's first step, and reports them once, with the line that switched it."""

    bug_check = ("debug_training_mode",)
    order = Order.LAST  # at a step's start, after the user's and the framework's callbacks of STEP_START

    def __init__(self) -> None:
        self.switches = _SwitchLines()
        self.watched: list[_Watched] | None = None  # None: the epoch's first step takes the baseline
        self.suspects: list[_Watched] = []  # watched modules in eval mode at this step's start
        self.eval_steps = self.steps = 0
        self.first: tuple[int, list[str]] | None = None  # (step in epoch, from 1; the modules in eval mode)
        self.with_grad: set[int] | None = None  # the parameters that got a gradient in the run's first step
        self.done = False

    @classmethod
    def from_config(cls, config: Config, state: RunState) -> TrainingMode | None:
        return cls() if config.bool("debug_training_mode") else None

    @on(Event.EPOCH_START)
    def new_epoch(self, state: RunState) -> None:
        self.watched, self.eval_steps, self.first = None, 0, None

    @on(Event.STEP_START)
    def look(self, state: RunState) -> None:
        if self.done:
            return
        if self.watched is None:
            self._baseline(state)
            return
        self.steps = state.steps_in_epoch
        self.suspects = [w for w in self.watched if not w.module.training]
        self.switches.switched_on.clear()

    @on(Event.AFTER_FORWARD, Order.FIRST)
    def count(self, state: RunState) -> None:
        """A suspect that train_step itself switched to training mode (model.train() at its start, an acting
        loop's eval mode at its end) trained as it should; one whose parameters no longer train does not matter."""
        if not self.suspects:
            return
        in_eval = [w.name for w in self.suspects if id(w.module) not in self.switches.switched_on and w.trained]
        self.suspects = []
        if in_eval:
            self.eval_steps += 1
            if self.first is None:
                self.first = (state.step_in_epoch + 1, in_eval)

    def _baseline(self, state: RunState) -> None:
        modules = dict(state.model.named_modules())
        self.watched = [
            _Watched(n, m, _owner(n, modules)) for n, m in modules.items() if m.training and differs_by_mode(m)
        ]
        self.switches.lines.clear()
        if self.with_grad is not None:
            self._keep_trained()

    @on(Event.AFTER_BACKWARD, once=True)
    def first_gradients(self, state: RunState) -> None:
        self.with_grad = {id(p) for p in state.model.parameters() if p.grad is not None}
        self._keep_trained()

    def _keep_trained(self) -> None:
        """Only modules whose parameters got a gradient in the first step are part of what is trained (a frozen
        teacher's dropout, run in eval mode under no_grad on purpose, is not)."""
        self.watched = [w for w in self.watched or [] if any(id(p) in (self.with_grad or ()) for p in w.owner)]
        self.switches.ids = {id(w.module) for w in self.watched}
        if self.watched:
            self.switches.install()

    @on(Event.EPOCH_END, Order.OBSERVE)
    @on(Event.FINISH, Order.OBSERVE)
    def conclude(self, state: RunState) -> None:
        if self.done or self.first is None or self.watched is None:
            return
        self.done = True
        self.switches.uninstall()
        report(self._finding(state))

    @on(Event.CLOSE)
    def close(self, state: RunState) -> None:
        self.switches.uninstall()

    def _finding(self, state: RunState) -> Finding:
        step, names = self.first  # type: ignore[misc]
        modules = {w.name: w.module for w in self.watched or []}
        frames = [self.switches.lines.get(id(modules[name])) for name in names]
        frame = next((f for f in frames if f is not None), None)
        how = (
            f"{format_frame(frame)} switched it to eval mode"
            if frame is not None
            else "it was switched to eval mode without a call of .eval()/.train(False) that this check saw"
        )
        parts = [f"{type(modules[n]).__name__} {n!r}" for n in names[:3]]
        more = f" and {len(names) - 3} more" if len(names) > 3 else ""
        return Finding(
            "warning",
            CHECK,
            f"from train step {step} of epoch {state.epoch} on, {self.eval_steps} of the epoch's {self.steps} train "
            f"steps ran their forward with the model in eval mode: {how}, and nothing switched it back before the "
            f"next train step (only the engine's model.train() at the next epoch's start does). Its parts that depend "
            f"on the mode ({', '.join(parts)}{more}) were in training mode at the epoch's first step and then trained "
            f"as they evaluate: {_what_changes([modules[n] for n in names])}. Call model.train() again after the code "
            f"that switched it (a mode meant for the whole epoch belongs in an epoch_start callback). ({OFF} turns "
            f"this check off.)",
            evidence={
                "problem": PROBLEM,
                "eval_steps": self.eval_steps,
                "steps_in_epoch": self.steps,
                "first_step_in_epoch": step,
                "modules_in_eval": names[:20],
            },
            where={"module": names[0], **({"line": format_frame(frame)} if frame is not None else {})},
            fix="Call model.train() after the evaluation that switched the model to eval mode.",
            option=OFF,
        )


def _what_changes(modules: list[nn.Module]) -> str:
    """What eval mode changes in ``modules``, in words."""
    said = []
    if any(isinstance(m, (nn.modules.dropout._DropoutNd, nn.RNNBase, nn.MultiheadAttention)) for m in modules):
        said.append("no dropout")
    if any(statistics_of(m) for m in modules):
        said.append("normalisation with running statistics (or power-iteration vectors) that these steps do not update")
    if not said or any(reads_training_flag(type(m)) for m in modules):
        said.append("the eval branch of code that reads self.training")
    return ", ".join(said)


PLUGINS = (TrainingMode,)
