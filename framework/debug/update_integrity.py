"""Are the updates what the user thinks they are? (``debug_update_integrity``, on by default.)

Two kinds of silent update bugs:

- Parameters the step uses that are not the model's: modules kept in a plain Python list or dict
  (``self.layers = [nn.Linear(...)]``), a tensor attribute made with ``requires_grad=True``
  instead of ``nn.Parameter``, a module of the config used beside the model. Their gradients are
  computed, but the optimizer never updates them, checkpoints do not save them and ``model.to``
  does not move them. Watched during the probe session's run of the first batch (a torch
  function mode and a global module hook on the model copy; the real step runs unwatched).
- Updates that change nothing: the first update and the last update of each epoch (the partial
  accumulation window) must change the parameters that got gradients (a few values of each are
  compared, one host sync each; fused optimizers leave no version counter to read). Catches
  optimizers that decide themselves when to update, e.g. one that accumulates on its own and
  drops an epoch's last partial window.

The optimizer's param groups themselves (parameters left out, listed twice, another copy's) are
judged by the sanity check after the first backward (``model_checks.optimizer_findings``).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass

import torch
from torch import nn
from torch.overrides import TorchFunctionMode

from framework.base.config import Config
from framework.base.errors import ModelCheckError
from framework.base.findings import Finding, report
from framework.base.options import register
from framework.check_library import sharded
from framework.check_library.compiled_gradients import compare_with_eager, is_compiled
from framework.check_library.model_checks import optimized_ids, overridden_at
from framework.check_library.module_tracker import ModuleTracker
from framework.check_library.tensors import format_frame, iter_tensors, user_frame
from framework.core.events import Event, Order
from framework.core.plugin import on
from framework.core.run_ctx import RunCtx
from framework.core.state import RunState
from framework.debug.first_step import SharedRunCheck
from framework.debug.sanity import report_findings

CHECK = "update-integrity check"
FINGERPRINT = 64  # values per parameter compared before and after a checked update
MIN_JUDGED_LR = 1e-6  # below this, an update may change nothing representable

register(
    "debug_update_integrity",
    "bool",
    True,
    "Name parameters used in the step that the model does not register, and parameters an update did not change.",
    __name__,
)


@dataclass
class _Loose:
    """A tensor that requires grad, used by the step, not registered in the model."""

    shape: list[int]
    where: str  # the user's source line of its first use
    module: str | None  # the model's module running then
    owner: str | None = None  # what holds it: "the plain list 'layers' of module 'enc'"


class _UnregisteredWatch(TorchFunctionMode):
    """Records leaf tensors that require grad, are used by torch functions, and are not the model's parameters."""

    def __init__(self, model: nn.Module, tracker: ModuleTracker):
        super().__init__()
        self.known = {id(p) for p in model.parameters()}
        self.tracker = tracker
        self.owners = _plain_containers(model)
        self.loose: dict[int, _Loose] = {}

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        for t in iter_tensors((args, kwargs)):
            # A parameter, or a tensor a module keeps: not a leaf made during the step (an input to a gradient penalty).
            held = isinstance(t, nn.Parameter) or id(t) in self.owners
            if held and t.requires_grad and t.is_leaf and id(t) not in self.known and id(t) not in self.loose:
                where = format_frame(user_frame())
                self.loose[id(t)] = _Loose(list(t.shape), where, self.tracker.current, self.owners.get(id(t)))
        return func(*args, **kwargs)


def _plain_containers(model: nn.Module) -> dict[int, str]:
    """Tensor id -> the plain list/tuple/dict attribute (or plain tensor attribute) of a module that holds it."""
    owners: dict[int, str] = {}
    for path, module in model.named_modules():
        for attr, value in vars(module).items():
            if attr.startswith("_"):
                continue
            where = f"module '{path or '(model)'}' ({type(module).__name__})"
            if isinstance(value, torch.Tensor) and not isinstance(value, nn.Parameter):
                owners.setdefault(id(value), f"the plain tensor attribute {attr!r} of {where}")
                continue
            items = value.values() if isinstance(value, dict) else value if isinstance(value, (list, tuple)) else ()
            kind = type(value).__name__
            for item in items:
                tensors = item.parameters() if isinstance(item, nn.Module) else [item]
                for t in tensors:
                    if isinstance(t, torch.Tensor):
                        owners.setdefault(id(t), f"the plain {kind} {attr!r} of {where}")
    return owners


def unregistered_finding(loose: list[_Loose]) -> Finding:
    """One warning for the step's tensors that require grad but are not the model's parameters."""
    first = loose[0]
    held = f", held in {first.owner}" if first.owner else ""
    running = f" in module '{first.module}'" if first.module else ""
    fix = (
        "Keep modules in nn.ModuleList / nn.ModuleDict (parameters in nn.Parameter / nn.ParameterList), or create "
        "them inside the model's __init__, so that the model registers them."
    )
    return Finding(
        "warning",
        "sanity check",
        f"the step uses {len(loose)} tensor(s) that require grad but are not parameters of the model from get_model "
        f"(first: shape {first.shape}{held}, used{running} at {first.where}). They get gradients, but the "
        f"optimizer never updates them, checkpoints do not save them and model.to(device) does not move them. {fix}",
        evidence={"tensors": len(loose), "shapes": [t.shape for t in loose[:8]]},
        where={
            "line": first.where,
            **({"module": first.module} if first.module else {}),
            **({"held_in": first.owner} if first.owner else {}),
        },
        fix=fix,
    )


class UpdateIntegrity(SharedRunCheck):
    """Watches the first batch's probe run for unregistered parameters; checks that updates change parameters."""

    bug_check = ("debug_update_integrity",)

    check = CHECK

    def __init__(self) -> None:
        self.fingerprint: torch.Tensor | None = None  # the fingerprint before the update being checked
        self.updated: list[nn.Parameter] = []  # the parameters with gradients at that update
        # In a compiled run, their gradients (references, alive through the optimizer step anyway): a warning compares
        # them with an eager step of the batch (compiled_gradients).
        self.grads: list[torch.Tensor] = []
        self.skip_flag: torch.Tensor | None = None  # the device flag that may skip the update being checked
        self.checked_first = False
        self.warned = False

    @classmethod
    def from_config(cls, config: Config, state: RunState) -> UpdateIntegrity | None:
        return cls() if config.bool("debug_update_integrity") else None

    @contextlib.contextmanager
    def observe(self, state: RunState, model: nn.Module) -> Iterator[_UnregisteredWatch]:
        tracker = ModuleTracker(model)
        watch = _UnregisteredWatch(model, tracker)
        with tracker, watch:
            yield watch

    def conclude(self, state: RunState, watch: _UnregisteredWatch, run_ctx: RunCtx | None) -> None:
        if watch.loose:
            finding = unregistered_finding(list(watch.loose.values()))
            report_findings(
                state, "first step", [finding], ModelCheckError, False, off="debug_update_integrity = False"
            )

    @on(Event.BEFORE_OPTIMIZER_STEP, Order.OBSERVE)  # after the checks that may skip the update on the device
    def before_update(self, state: RunState) -> None:
        last_of_epoch = state.step_in_epoch + 1 == state.steps_in_epoch
        if self.warned or (self.checked_first and not last_of_epoch) or state.control.update_skipped:
            return
        if max(group["lr"] for group in state.optimizer.param_groups) < MIN_JUDGED_LR:
            return  # a warmup from 0 or a tiny rate changes nothing on purpose (the learning watch judges rates)
        self.skip_flag = state.control.any_skip_flag
        self.updated = [p for p in state.model.parameters() if p.grad is not None]
        self.grads = [p.grad for p in self.updated] if is_compiled(state.step_model) else []
        self.fingerprint = _fingerprint(self.updated)

    @on(Event.AFTER_OPTIMIZER_STEP)
    def after_update(self, state: RunState) -> None:
        before, self.fingerprint = self.fingerprint, None
        if before is None:
            return
        updated, self.updated = self.updated, []
        grads, self.grads = self.grads, []
        first, self.checked_first = not self.checked_first, True
        changed = before.numel() == 0 or not torch.equal(before, _fingerprint(updated))  # a host sync, twice an epoch
        if sharded.on_any_rank(changed, updated):  # under FSDP: changed in some rank's slice
            return
        if self.skip_flag is not None and bool(self.skip_flag):
            return  # skipped on purpose (non-finite gradients)
        self.warned = True
        which = "the first update" if first else f"the last update of epoch {state.epoch}"
        accum = state.config.int("accum_grad_multiple_step")
        if accum > 1 and not first:
            which += f" (a partial accumulation window of {state.step_in_epoch % accum + 1} of {accum} batches)"
        step = overridden_at(state.optimizer, "step")
        own = f" (its step() is defined at {step})" if step else ""
        held = optimized_ids(state.optimizer)
        if not any(id(p) in held for p in updated):
            cause = (
                "None of them is in the optimizer's param groups: it updates other tensors (see the first step's "
                "findings)."
            )
        else:
            cause = (
                "An optimizer that decides itself when to update (e.g. one that accumulates gradients on its own) "
                "drops updates the engine asked for, such as an epoch's last partial window; accumulate with "
                "accum_grad_multiple_step instead."
            )
        if grads and state.batch is not None:
            names = {id(p): n for n, p in state.model.named_parameters()}
            compiled = {names[id(p)]: float(g.detach().double().norm()) for p, g in zip(updated, grads, strict=True)}
            compared = compare_with_eager(state, compiled, list(compiled))
            cause = compared.sentence() if compared.differ else f"{cause} {compared.sentence()}"
        report(
            Finding(
                "warning",
                "update integrity",
                f"{which} changed no parameter, although the parameters got gradients and the engine called "
                f"{type(state.optimizer).__name__}.step(){own}. {cause} (debug_update_integrity = False turns this "
                f"check off.)",
                evidence={
                    "parameters_with_gradient": len(updated),
                    "in_param_groups": sum(id(p) in held for p in updated),
                    "update": "first" if first else f"last of epoch {state.epoch}",
                },
                where={"optimizer": type(state.optimizer).__name__, **({"step_defined_at": step} if step else {})},
                fix="Accumulate with accum_grad_multiple_step instead of inside the optimizer"
                if any(id(p) in held for p in updated)
                else "Build the optimizer over the parameters of the model that is trained.",
                option="debug_update_integrity = False",
            )
        )


def _fingerprint(params: list[nn.Parameter]) -> torch.Tensor:
    """A few values of each parameter (of this rank's slice under FSDP): an update changes them, a skipped one
    does not."""
    parts = [sharded.stored(p.detach()).flatten()[:FINGERPRINT].float() for p in params]
    return torch.cat([t.to(parts[0].device) for t in parts]) if parts else torch.empty(0)


PLUGINS = (UpdateIntegrity,)
