"""Is evaluation really evaluation? (``debug_eval_mode``, on by default.)

Three silent bugs make dev scores lie or train another network than the one evaluated:

- randomness left on in eval mode: ``F.dropout(x, p)`` (whose ``training`` defaults to True),
  noise injection not gated by ``self.training``. Before the first step, the first sequences of
  the batch run once more through ``train_step`` as an evaluation does (eval mode,
  ``run_ctx.train_flag`` False, on a copy of the model) while ``train_only_randomness`` follows
  every random draw: a dropout mask or fixed-scale noise that reaches an activation is named with
  its op, module and line;
- a model trained in eval mode: ``train_step`` calling ``model.eval()`` (or a submodule's), which
  the engine's ``model.train()`` at each epoch start does not undo. The probe session's run of the
  first batch in training mode records which modules run their forward only in eval mode, with
  gradients, and which ``.eval()`` call switched them;
- eval statistics that training never updates: batch-norm running statistics or spectral-norm
  vectors of a module that the evaluation uses but no training-mode forward runs (an EMA copy
  updated parameter by parameter, an eval-only branch). Such modules are noted at the first step;
  at the first evaluation, a module whose parameters changed while its statistics stayed those of
  the first step, and whose eval output is far from its training-mode output on those sequences,
  is named (a frozen teacher keeps both).

Standard practice stays quiet: dropout and batch norm differing between the modes, a VAE that
samples in evaluation, Monte Carlo dropout (an evaluation that runs the model several times on the
same input), a frozen teacher run in eval mode under ``torch.no_grad()``, a module kept in eval mode
by its own ``train()`` (frozen batch norm).
"""

from __future__ import annotations

import contextlib
import traceback
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn

from framework.base import log
from framework.base.config import Config
from framework.base.errors import ModelCheckError
from framework.base.findings import Finding
from framework.base.options import register
from framework.check_library.mode_dependence import mode_dependent_parts, statistics_of
from framework.check_library.module_tracker import ModuleTracker
from framework.check_library.probe import PROBE_SESSION, ProbeLimit, model_copy, unseen
from framework.check_library.tensors import calling_user_frame, format_frame, map_tensors
from framework.check_library.train_only_randomness import RandomnessWatch, TrainOnlyRandomness
from framework.core.events import Event
from framework.core.plugin import on
from framework.core.run_ctx import RunCtx
from framework.core.state import RunState
from framework.debug.first_step import SharedRunCheck
from framework.debug.sanity import report_findings

CHECK = "eval-mode check"
OFF = "debug_eval_mode = False"

register(
    "debug_eval_mode",
    "bool",
    True,
    "First step: randomness left on in eval mode, a model trained in eval mode; first evaluation: eval "
    "statistics (batch norm, spectral norm) that training never updates.",
    __name__,
)

# An eval output this far (relative) from the training-mode output of the same input is not rounding.
FAR = 0.1
# Sequences of the first batch run as an evaluation (enough for batch norm in training mode).
SUB_BATCH = 4


@dataclass
class _TrainingRun:
    """What the run of the first batch in training mode showed about the modules' modes."""

    start_training: set[str] = field(default_factory=set)  # in training mode when train_step was called
    ran_train: set[str] = field(default_factory=set)  # ran a forward in training mode
    ran_eval_with_grad: set[str] = field(default_factory=set)  # ran a forward in eval mode, gradients on
    switched: dict[str, traceback.FrameSummary | None] = field(default_factory=dict)  # train(False) calls


@dataclass
class _Stale:
    """A module with eval statistics that the training step does not update, noted at the first step."""

    name: str
    args: tuple  # its input on the first batch (detached)
    buffers: list[torch.Tensor]  # the real model's buffers of it, as at the first step
    params: list[torch.Tensor]  # and its parameters


def _recording_train(module: nn.Module, name: str, switched: dict) -> Callable[[bool], nn.Module]:
    """``module.train`` that remembers where the user's code switched ``module`` to eval mode."""
    original = module.train

    def train(mode: bool = True) -> nn.Module:
        if not mode:
            switched.setdefault(name, calling_user_frame())
        return original(mode)

    return train


@contextlib.contextmanager
def _modes_watched(model: nn.Module, run: _TrainingRun) -> Iterator[None]:
    """During the block, record in ``run`` in which mode each module of ``model`` (a probe copy) runs."""
    names = {id(m): n or "(model)" for n, m in model.named_modules()}
    modules = list(model.modules())
    run.start_training = {names[id(m)] for m in modules if m.training}

    def pre(module: nn.Module, args: Any) -> None:
        name = names.get(id(module))
        if name is None:
            return
        if module.training:
            run.ran_train.add(name)
        elif torch.is_grad_enabled():
            run.ran_eval_with_grad.add(name)

    handle = nn.modules.module.register_module_forward_pre_hook(pre)
    for module in modules:  # an instance attribute: .eval() and the recursion of .train() call it
        module.train = _recording_train(module, names[id(module)], run.switched)
    try:
        yield
    finally:
        handle.remove()
        for module in modules:
            module.__dict__.pop("train", None)


def _inside(name: str, others: list[str]) -> bool:
    """Whether module ``name`` is one of ``others`` or lies inside one of them."""
    return any(o == name or o == "(model)" or name.startswith(o + ".") for o in others)


def trained_in_eval(modules: dict[str, nn.Module], run: _TrainingRun) -> list[str]:
    """The outermost modules that the training step ran only in eval mode, with gradients, although they were
    in training mode when it started, hold trainable parameters and compute differently in the two modes."""
    found = sorted(
        name
        for name in run.ran_eval_with_grad - run.ran_train
        if name in run.start_training
        and name in modules
        and any(p.requires_grad for p in modules[name].parameters())
        and mode_dependent_parts(modules[name])
    )
    return [name for name in found if not _inside(name, [o for o in found if o != name])]


def _trained_in_eval_finding(modules: dict[str, nn.Module], run: _TrainingRun, names: list[str]) -> Finding:
    name = names[0]
    module = modules[name]
    frame = run.switched.get(name)
    how = (
        f"train_step switched it at {format_frame(frame)}"
        if frame is not None
        else "it was set to eval mode without .eval()/.train(False)"
    )
    more = f" (also: {', '.join(repr(n) for n in names[1:4])})" if len(names) > 1 else ""
    return Finding(
        "warning",
        "sanity check",
        f"module {name!r} ({type(module).__name__}) runs its forward in eval mode during the training step{more}: "
        f"{how}. Its parts that depend on the mode ({', '.join(mode_dependent_parts(module))}) then compute as in "
        f"evaluation while the loss is trained: no dropout, batch norm normalising with running statistics that "
        f"it never updates, spectral norm without its power iteration. The network trained is not the one the "
        f"config describes, and the engine's model.train() at each epoch start does not undo a switch made in "
        f"every step. Remove the call, or switch back with model.train() before the forward of the loss (a part "
        f"frozen on purpose runs under torch.no_grad() or with requires_grad_(False)). ({OFF} turns this check "
        f"off.)",
        evidence={
            "problem": "a model trained in eval mode",  # as the training-mode check's: one problem, one record
            "modules_in_eval": len(names),
            "mode_dependent": mode_dependent_parts(module),
        },
        where={"module": name, "modules": names, **({"line": format_frame(frame)} if frame is not None else {})},
        fix="Remove the switch to eval mode, or call model.train() again before the forward of the loss.",
        option=OFF,
    )


def _randomness_finding(modules: dict[str, nn.Module], found: TrainOnlyRandomness) -> Finding:
    draw = found.draw
    where = format_frame(draw.frame)
    module = modules.get(draw.module or "")
    inside = f" in module {draw.module!r} ({type(module).__name__})" if module is not None else ""
    if found.kind == "mask":
        what = (
            f"a random mask ({draw.op}, applied by {found.applied_by}) multiplies an activation in eval mode: a "
            f"dropout that model.eval() does not switch off"
        )
        fix = (
            "F.dropout(x, p) defaults to training=True; use an nn.Dropout module or F.dropout(x, p, "
            "training=self.training)"
        )
    else:
        what = (
            f"random noise ({draw.op}) of a fixed scale is added ({found.applied_by}) to an activation in eval "
            f"mode: a regularisation noise that model.eval() does not switch off"
        )
        fix = "add it only in training: `if self.training: x = x + noise`"
    return Finding(
        "warning",
        "sanity check",
        f"randomness is active in evaluation: {what}, at {where}{inside}. Dev scores are then noisy and measured "
        f"on a damaged network, and the same input gives different predictions. {fix}. ({OFF} turns this check "
        f"off.)",
        evidence={"kind": found.kind, "op": draw.op, "applied_by": found.applied_by},
        where={"op": draw.op, "line": where, **({"module": draw.module} if module is not None else {})},
        fix=fix[0].upper() + fix[1:] + ".",
        option=OFF,
    )


def _first_input(args: tuple) -> tuple[int, tuple[int, ...]]:
    """The memory and shape of a forward call's first tensor argument: equal for repeated passes of one input."""
    tensor = next((a for a in args if isinstance(a, torch.Tensor)), None)
    return (0, ()) if tensor is None else (tensor.untyped_storage().data_ptr(), tuple(tensor.shape))


def mode_gap(module: nn.Module, args: tuple) -> float:
    """How far (relative) ``module``'s eval output on ``args`` is from its training-mode output; on copies of it."""
    with unseen(), torch.no_grad():
        evaluated = model_copy(module).eval()(*args)
        trained = model_copy(module).train()(*args)
    if not isinstance(evaluated, torch.Tensor) or not isinstance(trained, torch.Tensor):
        return 0.0
    reference = trained.float().norm().item()
    return (evaluated.float() - trained.float()).norm().item() / reference if reference > 0 else 0.0


class EvalModeCheck(SharedRunCheck):
    """Watches the first batch's training-mode run, runs it once as an evaluation, judges at the first evaluation."""

    bug_check = ("debug_eval_mode",)
    check = CHECK

    def __init__(self) -> None:
        self.run: _TrainingRun | None = None
        self.stale: list[_Stale] = []

    @classmethod
    def from_config(cls, config: Config, state: RunState) -> EvalModeCheck | None:
        return cls() if config.bool("debug_eval_mode") else None

    @contextlib.contextmanager
    def observe(self, state: RunState, model: nn.Module) -> Iterator[_TrainingRun]:
        run = _TrainingRun()
        with _modes_watched(model, run):
            yield run
        self.run = run  # only a run that completed tells which modules trained in eval mode

    def skipped(self, state: RunState, limit: ProbeLimit) -> None:
        log.v5(f"Eval-mode check: the watched run of the first step failed ({limit}).")
        self.conclude(state, None, None)  # the evaluation run is still worth trying

    def conclude(self, state: RunState, seen: _TrainingRun | None, run_ctx: RunCtx | None) -> None:
        session = state.store.get(PROBE_SESSION)
        modules = {name or "(model)": m for name, m in state.model.named_modules()}
        findings = []
        culprits = trained_in_eval(modules, self.run) if self.run is not None else []
        if culprits:
            findings.append(_trained_in_eval_finding(modules, self.run, culprits))
        try:
            found = self._evaluate_first_batch(state, session, modules, culprits)
        except ProbeLimit as exc:
            log.v5(f"Eval-mode check: the first batch could not be run as an evaluation ({exc}).")
            found = []
        if found:
            findings.append(_randomness_finding(modules, found[0]))
        report_findings(state, "first step", findings, ModelCheckError, False, off=OFF)

    def _evaluate_first_batch(
        self, state: RunState, session: Any, modules: dict[str, nn.Module], culprits: list[str]
    ) -> list[TrainOnlyRandomness]:
        """Run the first batch as an evaluation: follow its random draws, note modules with stale statistics."""
        run = self.run

        def note_stale(name: str, module: nn.Module, args: tuple, output: Any) -> None:
            if (
                run is None
                or name in run.ran_train
                or name not in run.start_training
                or _inside(name, culprits)
                or statistics_of(module) is None
                or any(s.name == name for s in self.stale)
            ):
                return
            real = modules[name]
            self.stale.append(
                _Stale(
                    name,
                    map_tensors(args, torch.Tensor.detach),
                    [b.detach().clone() for b in real.buffers()],
                    [p.detach().clone() for p in real.parameters()],
                )
            )

        batch = dict(state.batch)
        for size in dict.fromkeys((min(SUB_BATCH, len(state.batch_indices)), len(state.batch_indices))):
            # A few sequences cost a fraction of the batch; code that needs the real batch size gets all of it.
            with session.isolated(CHECK) as model, torch.enable_grad():  # gradients tell activations from data
                tracker = ModuleTracker(model, post_hook=note_stale)
                watch = RandomnessWatch(tracker)
                inputs: list[tuple[int, tuple[int, ...]]] = []
                counting = model.register_forward_pre_hook(
                    lambda _m, args, seen=inputs: seen.append(_first_input(args))
                )
                # modules the step itself put back in training mode (model.train() at its start, as an acting loop
                # does): their randomness is the step's choice of mode, not randomness left on in eval mode
                trained = {id(m) for m in model.modules()}
                ran_training: set[str] = set()
                modes = nn.modules.module.register_module_forward_pre_hook(
                    lambda m, _args, seen=ran_training, names=tracker.names, own=trained: (
                        seen.add(names[id(m)]) if m.training and id(m) in own else None
                    )
                )
                try:
                    with tracker, watch:
                        session.changed_run(CHECK, model, {k: t[:size] for k, t in batch.items()}, stage="eval")
                    if watch.found and len(inputs) > 1 and len(set(inputs)) == 1:
                        log.v4(
                            f"Eval-mode check: the evaluation runs the model {len(inputs)} times on the same input "
                            f"and its randomness stays on: Monte Carlo sampling (MC dropout), by design."
                        )
                        return []
                    return [f for f in watch.found if f.draw.module not in ran_training]
                except ProbeLimit:
                    self.stale = []
                    if size == len(state.batch_indices):
                        raise
                finally:
                    counting.remove()
                    modes.remove()
        return []

    @on(Event.EVAL_START, once=True)
    def check_first_evaluation(self, state: RunState) -> None:
        """Name the modules evaluated with statistics that training has not updated since the first step."""
        stale, self.stale = self.stale, []
        modules = {name or "(model)": m for name, m in state.model.named_modules()}
        findings = []
        for noted in stale:
            module = modules.get(noted.name)
            if module is None or not _changed_apart(module, noted):
                continue
            try:
                gap = mode_gap(module, noted.args)
            except Exception as exc:  # the module alone cannot be called like this: cannot judge it
                log.v5(f"Eval-mode check: module {noted.name!r} could not be run alone ({type(exc).__name__}).")
                continue
            if gap > FAR:
                findings.append(_stale_finding(noted.name, module, gap, state.epoch))
        report_findings(state, "first evaluation", findings, ModelCheckError, False, off=OFF)


def _changed_apart(module: nn.Module, noted: _Stale) -> bool:
    """Whether training changed the module's parameters but left its statistics as they were: statistics that a
    training-mode forward or a copy from the trained model updates, and a frozen module (a teacher) keeps both."""
    same_buffers = all(torch.equal(b, s) for b, s in zip(module.buffers(), noted.buffers, strict=True))
    same_params = all(torch.equal(p, s) for p, s in zip(module.parameters(), noted.params, strict=True))
    return same_buffers and not same_params


def _stale_finding(name: str, module: nn.Module, gap: float, epoch: int) -> Finding:
    return Finding(
        "warning",
        "sanity check",
        f"module {name!r} ({type(module).__name__}) is evaluated with its {statistics_of(module)} as they were "
        f"initialised: its parameters changed in epoch {epoch}, but no training-mode forward of it ran and nothing "
        f"else updated them. Its eval "
        f"output differs from its training-mode output on the first batch by {gap:.0%}, so every dev score uses an "
        f"uninitialised module. Typical causes: an EMA or teacher copy updated parameter by parameter (copy the "
        f"buffers too, or use torch.optim.swa_utils.AveragedModel(use_buffers=True)), a module used only in eval "
        f"mode. ({OFF} turns this check off.)",
        evidence={"relative_gap": gap, "epoch": epoch, "statistics": statistics_of(module)},
        where={"module": name},
        fix="Update the module's statistics with its parameters: copy the buffers too, or use "
        "torch.optim.swa_utils.AveragedModel(use_buffers=True).",
        option=OFF,
    )


PLUGINS = (EvalModeCheck,)
