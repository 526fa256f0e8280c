"""Gradients that survive an update (``debug_stale_gradients``, on by default).

After each update the engine calls ``optimizer.zero_grad(set_to_none=True)``, so at the start of
the next accumulation window no parameter may hold a gradient. One that does adds the old
gradients to the new ones: the effective step grows with every update while the loss does not
improve. The first few windows are checked (a Python loop over the parameters, no host sync);
the finding names the parameters and the cause: an optimizer whose ``zero_grad`` is overridden,
or something that puts ``.grad`` back (a hook, a wrapper that keeps gradients).
"""

from __future__ import annotations

from framework.base.config import Config
from framework.base.errors import ModelCheckError
from framework.base.findings import Finding
from framework.base.options import register
from framework.check_library.model_checks import by_module, optimized_ids, overridden_at
from framework.core.events import Event, Order
from framework.core.plugin import Plugin, on
from framework.core.state import RunState
from framework.debug.sanity import report_findings

register(
    "debug_stale_gradients",
    "bool",
    True,
    "Check at the start of the first accumulation windows that no gradient survived the last zero_grad.",
    __name__,
)

WINDOWS = 3  # accumulation windows checked after the first update


class StaleGradients(Plugin):
    """Looks for gradients at the start of the accumulation windows after the first updates."""

    bug_check = ("debug_stale_gradients",)

    order = Order.CHECK

    def __init__(self) -> None:
        self.checks_left = WINDOWS
        self.updated = False

    @classmethod
    def from_config(cls, config: Config, state: RunState) -> StaleGradients | None:
        return cls() if config.bool("debug_stale_gradients") else None

    @on(Event.AFTER_OPTIMIZER_STEP)
    def after_update(self, state: RunState) -> None:
        self.updated = True

    @on(Event.STEP_START)
    def check(self, state: RunState) -> None:
        if not self.updated:
            return
        self.updated = False
        self.checks_left -= 1
        if self.checks_left <= 0:
            self.callbacks.off(Event.STEP_START, self.check)
            self.callbacks.off(Event.AFTER_OPTIMIZER_STEP, self.after_update)
        kept = {id(p) for p in getattr(state.optimizer, "keeps_gradients", list)()}  # an optimizer's open window
        stale = [(n, p) for n, p in state.model.named_parameters() if p.grad is not None and id(p) not in kept]
        if not stale:
            return
        self.callbacks.off(Event.STEP_START, self.check)
        self.callbacks.off(Event.AFTER_OPTIMIZER_STEP, self.after_update)
        held = optimized_ids(state.optimizer)
        override = overridden_at(state.optimizer, "zero_grad")
        if not any(id(p) in held for _, p in stale):
            cause = (
                "they are in none of the optimizer's param groups, and optimizer.zero_grad clears only the tensors it "
                "holds (the optimizer was built over other tensors; see the first step's findings)"
            )
        elif override:
            cause = f"{type(state.optimizer).__name__}.zero_grad (defined at {override}) does not clear them"
        else:
            cause = "something puts .grad back after optimizer.zero_grad (a hook, or a wrapper that keeps gradients)"
        text = (
            f"gradients are not cleared between updates: {by_module(state.model, [n for n, _ in stale])} still hold "
            f"a gradient at the start of step {state.global_step}, after the engine's "
            f"optimizer.zero_grad(set_to_none=True); {cause}. Every update then adds up all earlier gradients: the "
            f"gradient norm grows with the step count while the loss does not improve. Let zero_grad set "
            f"p.grad = None (or zero it)."
        )
        names = [n for n, _ in stale]
        found = Finding(
            "warning",
            "sanity check",
            text,
            evidence={"parameters_with_stale_gradient": len(names), "step": state.global_step},
            where={
                "modules": list(dict.fromkeys(n.rpartition(".")[0] or "(model)" for n in names)),
                "parameters": names,
                "optimizer": type(state.optimizer).__name__,
                **({"zero_grad_defined_at": override} if override else {}),
            },
            fix="Let zero_grad set p.grad = None (or zero it) for every parameter the model trains.",
        )
        report_findings(state, "training", [found], ModelCheckError, False)


PLUGINS = (StaleGradients,)
