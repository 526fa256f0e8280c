"""A model that leaves training mode between train steps (``debug_training_mode``, on by default).

The engine calls ``model.train()`` once at each epoch's start. Code that runs between train steps (a validation in
a ``step_end`` callback, a sample generated at the end of ``train_step``, an acting loop) and calls ``model.eval()``
without switching back leaves the rest of the epoch training in eval mode: no dropout, batch norm normalising with
running statistics that those steps no longer update. Nothing fails; the dev score is worse.

Configured against applied, at every train step: the modules that compute differently in the two modes, are part
of what is trained (a frozen teacher is not) and are in training mode at the epoch's first step (after the
epoch-start callbacks, so batch norm frozen on purpose there is the baseline) must still be in training mode at each
later step's start, which costs one attribute read per such module. ``nn.Module.train`` is wrapped for the run (it calls the original at once) to remember the user's line that
switched each watched module to eval mode; a switch back clears it. A switch made inside the first step's
``train_step`` is the eval-mode check's (one problem, one record).
"""

from __future__ import annotations

import traceback
from typing import Any

from torch import nn

from framework.base.config import Config
from framework.base.findings import Finding, report
from framework.base.options import register
from framework.check_library.mode_dependence import differs_by_mode
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
    """Wraps ``nn.Module.train`` while installed: remembers, for the modules of ``ids``, the user's line of the last
    switch to eval mode that no switch back followed."""

    def __init__(self) -> None:
        self.ids: set[int] = set()
        self.lines: dict[int, traceback.FrameSummary | None] = {}
        self.original: Any = None

    def install(self) -> None:
        original = self.original = nn.Module.train
        lines, ids = self.lines, self.ids

        def train(module: nn.Module, mode: bool = True) -> nn.Module:
            if id(module) in ids:
                if mode:
                    lines.pop(id(module), None)
                elif id(module) not in lines:  # the first switch: a later one of a module in eval mode changes nothing
                    lines[id(module)] = calling_user_frame()
            return original(module, mode)

        train.__doc__, train.__wrapped__ = original.__doc__, original  # type: ignore[attr-defined]
        nn.Module.train = train  # type: ignore[method-assign]

    def uninstall(self) -> None:
        if self.original is not None and getattr(nn.Module.train, "__wrapped__", None) is self.original:
            nn.Module.train = self.original  # type: ignore[method-assign]
        self.original = None


def _trained(name: str, modules: dict[str, nn.Module], with_grad: set[int]) -> bool:
    """Whether the module ``name`` is part of what is trained: the nearest module holding parameters, it or one that
    contains it, has some that got a gradient in the first step (a frozen teacher's dropout, run in eval mode under
    no_grad on purpose, is not)."""
    parts = name.split(".") if name else []
    for i in range(len(parts), -1, -1):
        params = list(modules[".".join(parts[:i])].parameters())
        if params:
            return any(id(p) in with_grad for p in params)
    return False


class TrainingMode(Plugin):
    """Counts the train steps that start with a mode-dependent module switched to eval mode since the epoch began,
    and reports them once, with the line that switched."""

    bug_check = ("debug_training_mode",)
    order = Order.LAST  # at a step's start, after the user's and the framework's callbacks of STEP_START

    def __init__(self) -> None:
        self.switches = _SwitchLines()
        self.watched: list[tuple[str, nn.Module]] | None = None  # None: the epoch's first step takes the baseline
        self.eval_steps = self.steps = 0
        self.first: tuple[int, int, list[str]] | None = None  # (step in epoch, global step, modules in eval mode)
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
        in_eval = [name for name, module in self.watched if not module.training]
        self.steps = state.steps_in_epoch
        if in_eval:
            self.eval_steps += 1
            if self.first is None:
                self.first = (state.step_in_epoch, state.global_step, in_eval)

    def _baseline(self, state: RunState) -> None:
        self.watched = [(n, m) for n, m in state.model.named_modules() if m.training and differs_by_mode(m)]
        self.switches.lines.clear()
        if self.with_grad is not None:
            self._keep_trained(state)

    @on(Event.AFTER_BACKWARD, once=True)
    def first_gradients(self, state: RunState) -> None:
        self.with_grad = {id(p) for p in state.model.parameters() if p.grad is not None}
        self._keep_trained(state)

    def _keep_trained(self, state: RunState) -> None:
        modules = dict(state.model.named_modules())
        self.watched = [(n, m) for n, m in self.watched or [] if _trained(n, modules, self.with_grad or set())]
        self.switches.ids = {id(m) for _, m in self.watched}
        if self.watched and self.switches.original is None:
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
        step, global_step, names = self.first  # type: ignore[misc]
        modules = dict(self.watched or [])
        frames = {name: self.switches.lines.get(id(modules[name])) for name in names}
        frame = next((f for f in frames.values() if f is not None), None)
        how = (
            f"{format_frame(frame)} switched it to eval mode"
            if frame is not None
            else "it was switched to eval mode without a call of .eval()/.train(False) that this check saw"
        )
        parts = [f"{type(modules[n]).__name__} {n!r}" for n in names[:3]]
        more = f" and {len(names) - 3} more" if len(names) > 3 else ""
        total = self.steps
        return Finding(
            "warning",
            CHECK,
            f"from step {step + 1} of epoch {state.epoch} (global step {global_step}), {self.eval_steps} of the "
            f"epoch's {total} train steps started with the model in eval mode: {how}, and nothing switched it back "
            f"before the next train step (only the engine's model.train() at the next epoch's start does). Its parts "
            f"that depend on the mode ({', '.join(parts)}{more}) were in training mode at the epoch's first step and "
            f"then trained as they evaluate: no dropout, batch norm normalising with running statistics that these "
            f"steps do not update. Call model.train() again after the code that switched it (a mode meant for the "
            f"whole epoch belongs in an epoch_start callback). ({OFF} turns this check off.)",
            evidence={
                "problem": PROBLEM,
                "eval_steps": self.eval_steps,
                "steps_in_epoch": total,
                "first_step_in_epoch": step + 1,
                "modules_in_eval": names[:20],
            },
            where={"module": names[0], **({"line": format_frame(frame)} if frame is not None else {})},
            fix="Call model.train() after the evaluation that switched the model to eval mode.",
            option=OFF,
        )


PLUGINS = (TrainingMode,)
