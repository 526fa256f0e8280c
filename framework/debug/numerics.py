"""Catching NaN/Inf before the optimizer step, then naming the culprit.

With default options (``stop_on_nonfinite_train_score``) the check costs no host sync per step:
after backward, a device flag says whether an optimized loss (and, with
``num_allowed_consec_invalid_gradient_steps``, a gradient) is non-finite; the optimizer step
honours it on the device (``optim.step_unless``: fused optimizers skip the update in their
kernel, like under ``GradScaler``), so parameters never take a non-finite update. The host
reads the flag one step later (``LaggedFlag``), when it is long computed, and at the last step
of an epoch. Per step that is two small kernels on the losses (``0 * loss`` is NaN exactly when
the loss is not finite; NaN becomes the flag's 1.0), the flag's copy to the host (none on the CPU)
and a snapshot of torch's RNG state: the flag is the fused optimizer's ``found_inf`` as it is (``tools/benchmark-debug.py
--profile-plugins`` shows the cost). The debug flags check every module output (``debug_add_check_numerics_on_output``)
or every op output (``debug_add_check_numerics_ops``) plus the gradients, and decide at once
with one sync per step. When a check fails, the step is replayed with every check on
(``replay.py``) to name module, op, source line, parameter and batch entries; the batch,
parameters and RNG state are saved next to the checkpoints, and training stops with the
parameters untouched. ``num_allowed_consec_invalid_gradient_steps`` skips a few such updates
instead. Evaluation steps are checked too: a non-finite dev loss is replayed in eval mode and
named the same way, as a warning (the training goes on; its checkpoints stay).
"""

from __future__ import annotations

import dataclasses
import math
import os
from dataclasses import dataclass
from typing import Any

import torch

from framework.base import findings, log
from framework.base.accelerator import is_accelerator
from framework.base.config import Config
from framework.base.errors import FrameworkError
from framework.base.findings import Finding
from framework.base.host_syncs import LaggedFlag, host_value
from framework.base.options import register
from framework.base.rng import capture_step_rng, saveable_rng
from framework.check_library.module_tracker import ModuleTracker, matches_any
from framework.check_library.op_checks import OpSums
from framework.check_library.precision import diagnose_step
from framework.check_library.sharded import stored
from framework.check_library.step_sums import Producer, StepSums
from framework.check_library.tensors import floating_tensors
from framework.core.autocast import uses_grad_scaler
from framework.core.events import Event, Order
from framework.core.measurements import EAGER_ONLY
from framework.core.plugin import Plugin, on
from framework.core.run_ctx import MarkedLoss
from framework.core.scores import step_losses
from framework.core.state import RunState
from framework.debug.replay import replay_step
from framework.training import checkpoint

register(
    "stop_on_nonfinite_train_score",
    "bool",
    True,
    "Stop before the optimizer step when an optimized loss is NaN/Inf, and name the culprit by replaying the step.",
    __name__,
)

register(
    "num_allowed_consec_invalid_gradient_steps",
    "int",
    0,
    "Skip up to this many consecutive updates whose loss or gradient is non-finite (logged), then stop.",
    __name__,
    range="[0, inf)",
)

register(
    "debug_add_check_numerics_on_output",
    "bool",
    False,
    "Check every module's output and all gradients for NaN/Inf each step; on failure replay the step and name the module.",
    __name__,
)

register(
    "debug_add_check_numerics_ops",
    "bool",
    False,
    "Check every torch function's output and computed gradient for NaN/Inf each step; names aten op and source line.",
    __name__,
)

register(
    "debug_check_numerics_skip_modules",
    "list[str]",
    [],
    "Module path patterns (fnmatch, e.g. 'decoder.*.attn') whose outputs may be non-finite on purpose.",
    __name__,
)

register(
    "debug_check_numerics_nan_only",
    "bool",
    False,
    "Numerics checks flag NaN only, not +-Inf (e.g. -inf attention masks).",
    __name__,
)


OK, SKIP, STOP = 0, 1, 2  # what a step's check decides; across ranks the largest wins

_STEP_FIELDS = ("batch", "batch_indices", "run_ctx", "epoch", "step_in_epoch", "global_step", "dataset")


class NonFiniteError(FrameworkError):
    """Training stopped on NaN/Inf; the message holds the diagnosis."""


@dataclass
class CheckedStep:
    """A step whose verdict is on its way to the host, with what it takes to replay the step."""

    bad_ranks: LaggedFlag  # per rank, or one flag without distributed training: non-finite loss or gradient
    grad_norms: dict[str, torch.Tensor] | None  # parameter name -> gradient norm on the device (gradients checked)
    rng_state: dict[str, Any]
    fields: dict[str, Any]  # the RunState fields of the step (_STEP_FIELDS)

    @classmethod
    def record(
        cls,
        state: RunState,
        bad_ranks: torch.Tensor,
        rng_state: dict[str, Any],
        grad_norms: dict[str, torch.Tensor] | None = None,
    ) -> CheckedStep:
        """The step ``state`` is at, with its verdict ``bad_ranks`` (a device tensor) on its way to the host."""
        return cls(LaggedFlag(bad_ranks), grad_norms, rng_state, {n: getattr(state, n) for n in _STEP_FIELDS})

    def flagged_ranks(self) -> list[int]:
        """The ranks whose step was bad (reads the verdict: it waits only for its copy)."""
        flags = self.bad_ranks.read().tolist()
        return [rank for rank, bad in enumerate(flags if isinstance(flags, list) else [flags]) if bad]

    def as_state(self, state: RunState) -> RunState:
        """A view of the run at this step (the guard reads a step's verdict one step later), for the replay and
        the report; the engine's own state is left as it is."""
        return dataclasses.replace(state, **self.fields)


class NumericsGuard(Plugin):
    """Per-step NaN/Inf detection in training and evaluation; built only when an option asks for a check."""

    tasks = ("train", "eval")
    order = Order.CHECK
    # Its step-start callback must be the last one that can run the model or draw random numbers: what runs
    # before the step function then is neither recorded in the sums nor part of the RNG state a replay starts from.
    after = ("FirstStepProbes", "TensorBoardLogger", "ShellInRunner", "LayerOutputTemplate")
    provides = (EAGER_ONLY,)

    def __init__(self, config: Config, model: torch.nn.Module, device: torch.device):
        self.stop_on_loss = config.bool("stop_on_nonfinite_train_score")
        self.on_output = config.bool("debug_add_check_numerics_on_output")
        self.on_ops = config.bool("debug_add_check_numerics_ops")
        self.nan_only = config.bool("debug_check_numerics_nan_only")
        self.skip_patterns = list(config.get("debug_check_numerics_skip_modules") or [])
        self.allowed_invalid = config.int("num_allowed_consec_invalid_gradient_steps")
        # Under loss scaling, overflowing (scaled) gradients are normal: the scaler checks and skips them.
        self.check_grads = (self.on_output or self.on_ops or self.allowed_invalid > 0) and not uses_grad_scaler(config)
        # The debug checks record sums of every module/op output and decide at once (one sync per step).
        self.at_once = self.on_output or self.on_ops
        self.consecutive_invalid = 0
        self.rng_state: dict[str, Any] | None = None
        self.active = False
        self.sums = StepSums(self.nan_only)
        self.tracker: ModuleTracker | None = None
        self.op_sums: OpSums | None = None
        self.eval_reported: set[tuple[int, str]] = set()  # (epoch, dataset) whose first bad eval step was named
        # Culprits of a fast check that an exact replay found clean: their float32 sums overflow (values near the
        # float32 maximum, e.g. attention masks filled with finfo.min); flagged again with Inf only, not replayed.
        self.overflowing: set[str] = set()
        self.pending: CheckedStep | None = None  # the latest training step, verdict not read yet
        self.pending_eval: CheckedStep | None = None
        self.window_bad: torch.Tensor | None = None  # any bad step in the accumulation window, on the device
        # On the CPU a value is read without waiting for anything: each step is judged at once (see _check_on_host).
        self.verdict_on_host = not is_accelerator(device)
        self.hooks = []
        if self.on_output:
            for path, module in model.named_modules():
                # an nn.Sequential only calls its children: its input is the first's, its output the last's
                if not matches_any(path or "(model)", self.skip_patterns) and type(module) is not torch.nn.Sequential:
                    self.hooks.append(module.register_forward_hook(self._module_hook(path or "(model)")))
        if self.on_ops:
            self.tracker = ModuleTracker(model) if self.skip_patterns else None
            self.op_sums = OpSums(self.sums, self.skip_patterns, self.tracker)

    @classmethod
    def from_config(cls, config: Config, state: RunState) -> NumericsGuard | None:
        wanted = (
            config.bool("stop_on_nonfinite_train_score")
            or config.bool("debug_add_check_numerics_on_output")
            or config.bool("debug_add_check_numerics_ops")
            or config.int("num_allowed_consec_invalid_gradient_steps") > 0
        )
        return cls(config, state.model, state.device) if wanted else None

    def state_dict(self) -> dict[str, Any]:
        """The count of consecutive invalid updates, so that a resumed run allows no more of them than the
        uninterrupted one would.

        Only an interrupted (mid-epoch) checkpoint meets a training step whose verdict is still on its way (an
        epoch's last step is settled before evaluation and checkpoint); its update was skipped on the device
        already, so its verdict is read now and counted. Acting on it (the log line, or the replay that names the
        culprit) is not possible from a checkpoint, which holds neither its batch nor its RNG state: a resumed run
        that is then over the allowance stops at its next non-finite step. Nothing else lasts beyond a step: the
        accumulation window ends before any checkpoint, evaluation verdicts are settled at its end, and the
        evaluation reports made are of finished epochs.
        """
        consecutive = self.consecutive_invalid
        if self.pending is not None:
            consecutive = consecutive + 1 if self.pending.flagged_ranks() else 0
        return {"consecutive_invalid": consecutive}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Continue from ``state_dict``."""
        self.consecutive_invalid = state["consecutive_invalid"]

    def _module_hook(self, path: str):
        def record(module: torch.nn.Module, args: tuple, output: Any) -> None:
            if self.active:
                sums = self.sums
                inputs = [sums.add_input(t) for t in _floating(args)]
                outputs = [sums.add(t) for t in _floating(output)]
                sums.producers.append(Producer(path, inputs, outputs))

        return record

    @on(Event.STARTUP)
    def keep_eager(self, state: RunState) -> None:
        hooked = [
            n
            for n, on in (
                ("debug_add_check_numerics_on_output", self.on_output),
                ("debug_add_check_numerics_ops", self.on_ops),
            )
            if on
        ]
        if hooked:
            state.store.put(EAGER_ONLY, f"{', '.join(hooked)} hooks into every module or op of every step", by=self)

    @on(Event.STEP_START, Order.LAST)
    @on(Event.EVAL_STEP_START, Order.LAST)
    def on_step_start(self, state: RunState) -> None:
        # torch's generators (dropout, randn) replay the step; Python's and numpy's would cost ~100 us
        # per step to capture, and randomness of the data is already in the saved batch.
        self.rng_state = capture_step_rng(state.device)
        self.active = True
        if self.hooks and state.batch is not None:
            self.sums.outside(state.batch.values())
        if self.op_sums is not None:
            if self.tracker is not None:
                self.tracker.__enter__()
            self.op_sums.__enter__()

    @on(Event.EXCEPTION)
    @on(Event.CLOSE)
    def leave_step(self, state: RunState) -> None:
        if self.active and self.op_sums is not None:
            self.op_sums.__exit__(None, None, None)
            self.op_sums.clear()
            if self.tracker is not None:
                self.tracker.__exit__(None, None, None)
        self.active = False

    @on(Event.CLOSE)
    def remove_hooks(self, state: RunState) -> None:
        for hook in self.hooks:
            hook.remove()
        self.hooks = []
        self.pending = self.pending_eval = None

    # ------------------------------------------------------------------------------ training
    @on(Event.AFTER_BACKWARD)
    def on_after_backward(self, state: RunState) -> None:
        self.leave_step(state)
        if self.at_once:
            self._decide_at_once(state)
            return
        grad_norms = None
        if self.check_grads:
            named = [(n, p.grad) for n, p in state.model.named_parameters() if p.grad is not None]
            if named:
                norms = torch._foreach_norm([stored(g) for _, g in named])  # this rank's slices (FSDP)
                grad_norms = dict(zip([n for n, _ in named], norms, strict=True))
        if self.verdict_on_host and state.distributed is None:
            self._check_on_host(state, grad_norms)
            return
        values = list(step_losses(state.run_ctx, optimized_only=True).values())
        values += list(grad_norms.values()) if grad_norms else []
        bad = bad_ranks = _nonfinite(values)  # without distributed training: the step's flag is its one rank's
        if state.distributed is not None:
            bad_ranks = self._bad_ranks(state, bad > 0)
            bad = bad_ranks.any()
        if self.window_bad is not None:
            bad = torch.maximum(self.window_bad, bad.float())
        if state.at_update_boundary():
            state.control.skip_update_if(bad)
            self.window_bad = None
        else:
            self.window_bad = bad.float()
        previous = self.pending
        self.pending = CheckedStep.record(state, bad_ranks, self.rng_state, grad_norms)
        if previous is not None:
            self._settle(state, previous)
        if state.step_in_epoch + 1 == state.steps_in_epoch:  # no later step reads it: before evaluation and checkpoint
            last, self.pending = self.pending, None
            self._settle(state, last)

    def _check_on_host(self, state: RunState, grad_norms: dict[str, torch.Tensor] | None) -> None:
        """The verdict where the values are in host memory already (the CPU): read at once, which waits for
        nothing, so no flag goes to the optimizer and no step waits for a later one to be judged."""
        bad = not all(_finite_normalized(m) for m in state.run_ctx.losses.values() if not m.as_error)
        if grad_norms:
            bad = bad or host_value(_nonfinite(list(grad_norms.values()))) > 0
        if not bad:
            self.consecutive_invalid = 0
            return
        state.control.skip_update()  # this update, or the one that ends this accumulation window
        flag = torch.ones(1, dtype=torch.bool)
        self._settle(state, CheckedStep.record(state, flag, self.rng_state, grad_norms))

    def _bad_ranks(self, state: RunState, bad: torch.Tensor) -> torch.Tensor:
        """Per rank whether its step was bad, on the device (one entry without distributed training)."""
        if state.distributed is None:
            return bad.reshape(1)
        ranks = torch.zeros(state.distributed.size, dtype=torch.int32, device=bad.device)
        ranks[state.distributed.rank] = bad.to(torch.int32)
        return state.distributed.sum(ranks) > 0

    def _settle(self, state: RunState, step: CheckedStep) -> None:
        """Act on a step's verdict: its update was skipped on the device; count, log, or stop with a report."""
        bad_ranks = step.flagged_ranks()
        if not bad_ranks:
            self.consecutive_invalid = 0
            return
        self.consecutive_invalid += 1
        state = step.as_state(state)
        if self.consecutive_invalid <= self.allowed_invalid:
            log.v2(
                f"ep {state.epoch} step {state.step_in_epoch} (global {state.global_step}): non-finite "
                f"{_what_is_bad(state, step.grad_norms)}; update skipped ({self.consecutive_invalid} of "
                f"{self.allowed_invalid} allowed consecutive invalid steps)"
            )
            return
        rank = state.distributed.rank if state.distributed is not None else 0
        if rank not in bad_ranks:
            _raise_for_other_ranks(state, bad_ranks)
        self._stop(state, step.rng_state)

    def _decide_at_once(self, state: RunState) -> None:
        """The debug checks: decide now, with the recorded module/op sums (one host sync)."""
        decision, culprits = self._decide(state)
        if state.distributed is not None:  # every rank acts on the worst decision of any rank, at the same step
            decisions = torch.zeros(state.distributed.size, dtype=torch.int64)
            decisions[state.distributed.rank] = decision
            decisions = state.distributed.sum(decisions.to(state.device)).cpu()
            if int(decisions.max()) == STOP and decision != STOP:
                _raise_for_other_ranks(state, torch.nonzero(decisions == STOP).flatten().tolist())
            decision = max(decision, int(decisions.max()))
        if decision == OK:
            self.consecutive_invalid = 0
            return
        self.consecutive_invalid += 1
        if decision == SKIP:
            state.control.skip_update()
            log.v2(
                f"ep {state.epoch} step {state.step_in_epoch} (global {state.global_step}): non-finite "
                f"{_what_is_bad(state, None, culprits)}; update skipped ({self.consecutive_invalid} of "
                f"{self.allowed_invalid} allowed consecutive invalid steps)"
            )
            return
        self._stop(state, self.rng_state)

    # ---------------------------------------------------------------------------- evaluation
    @on(Event.EVAL_STEP_END)
    def on_eval_step_end(self, state: RunState) -> None:
        """A non-finite evaluation loss: name the culprit by replaying the step in eval mode, once per dataset and epoch."""
        self.leave_step(state)
        values = list(step_losses(state.run_ctx).values())
        if self.at_once:
            if self._all_finite(values):
                self.sums.clear()
                return
            culprits, overflow = self._flagged()
            losses_finite = _read_finite(values)
            if not (losses_finite and overflow):
                self._report_eval(state, self.rng_state, culprits if losses_finite else None)
            return
        previous = self.pending_eval
        self.pending_eval = CheckedStep.record(state, _nonfinite(values), self.rng_state)
        if previous is not None:
            self._settle_eval(state, previous)

    @on(Event.EVAL_END)
    def on_eval_end(self, state: RunState) -> None:
        last, self.pending_eval = self.pending_eval, None
        if last is not None:
            self._settle_eval(state, last)

    def _settle_eval(self, state: RunState, step: CheckedStep) -> None:
        if step.flagged_ranks():
            self._report_eval(step.as_state(state), step.rng_state, None)

    def _report_eval(self, state: RunState, rng_state: dict[str, Any], intermediate: list[Any] | None) -> None:
        """Warn of a non-finite evaluation step, named by a replay; ``intermediate``: the losses are finite and only
        these culprits of the fast check were flagged, which a clean replay shows to be sums that overflowed."""
        if (state.epoch, state.dataset) in self.eval_reported:
            return
        report = replay_step(state, rng_state, nan_only=self.nan_only, skip_patterns=self.skip_patterns)
        if intermediate is not None and not report.reproduced:
            if intermediate:
                self._note_overflow(state, intermediate)
            return
        self.eval_reported.add((state.epoch, state.dataset))
        effect = "its scores will be NaN/Inf" if intermediate is None else "its scores are finite"
        findings.report(
            Finding(
                "warning",
                "non-finite values in evaluation",
                f"step {state.step_in_epoch} of dataset {state.dataset!r} (epoch {state.epoch}): {effect}. The "
                f"training itself is not affected.\n{report.format()}",
                evidence={
                    "losses": report.losses,
                    "sequence_indices": report.seq_indices[:10],
                    "scores_finite": intermediate is not None,
                },
                where={"dataset": state.dataset, "step_in_epoch": state.step_in_epoch, **report.where()},
                fix="Fix the module and op the replay names (where); a mask filled with finfo.min, a log or a "
                "division of zero are the usual culprits.",
            )
        )

    # ---------------------------------------------------------------------- the debug checks
    def _decide(self, state: RunState) -> tuple[int, list[Any]]:
        """OK, SKIP (an allowed invalid update) or STOP for this step, and the flagged producers."""
        values = list(step_losses(state.run_ctx, optimized_only=True).values())
        if self.check_grads:  # the op check sums what autograd nodes compute, not their accumulation into .grad
            values += _grad_sums(state)
        if self._all_finite(values):
            self.sums.clear()
            return OK, []
        culprits, overflow = self._flagged()
        losses_and_grads_finite = _read_finite(values)
        if losses_and_grads_finite and (not culprits or overflow or not self._confirmed(state, culprits)):
            return OK, culprits  # infinities passed on from skipped modules, or a false alarm
        return (SKIP if self.consecutive_invalid + 1 <= self.allowed_invalid else STOP), culprits

    def _flagged(self) -> tuple[list[Any], bool]:
        """The culprits of a failed fast check, and whether they are known to overflow their sums (no NaN among
        the sums, every culprit found clean by an earlier replay); forgets the step's sums."""
        culprits = self.sums.culprits()
        overflow = bool(culprits) and {str(c) for c in culprits} <= self.overflowing and not self.sums.any_nan()
        self.sums.clear()
        return culprits, overflow

    def _confirmed(self, state: RunState, culprits: list[Any]) -> bool:
        """Replay a step whose losses and gradients are finite but where an intermediate value was
        flagged: the update would do no harm, so a clean replay means a false alarm of the fast check."""
        report = replay_step(state, self.rng_state, nan_only=self.nan_only, skip_patterns=self.skip_patterns)
        if report.reproduced or report.not_replayed:  # not replayed (FSDP): no way to call it a false alarm
            return True
        self._note_overflow(state, culprits)
        return False

    def _note_overflow(self, state: RunState, culprits: list[Any]) -> None:
        """An exact replay found the step clean: the culprits' float32 sums overflowed (or the step is not
        deterministic); later steps that flag only them with an infinite sum are not replayed again."""
        self.overflowing.update(str(c) for c in culprits)
        log.v2(
            f"ep {state.epoch} step {state.step_in_epoch}: the fast numerics check flagged "
            f"{', '.join(map(str, culprits[:3]))}, but the exact replay of the step is clean (a float32 sum of values "
            f"near the float32 maximum overflows, e.g. of a mask filled with finfo.min); continuing without "
            f"replaying for them again."
        )

    def _all_finite(self, values: list[torch.Tensor]) -> bool:
        """One host sync for losses, gradient sums and every recorded sum: stacked into one tensor and read back
        as Python numbers, two dispatches where a test on the device takes four (NaN-only mode: the recorded sums
        are checked for NaN only)."""
        terms = values + self.sums.sums
        if not terms:
            return True
        read = torch.stack(terms).tolist()
        if self.nan_only:
            return all(map(math.isfinite, read[: len(values)])) and not any(map(math.isnan, read[len(values) :]))
        return all(map(math.isfinite, read))

    def _stop(self, state: RunState, rng_state: dict[str, Any]) -> None:
        report = replay_step(state, rng_state, nan_only=self.nan_only, skip_patterns=self.skip_patterns)
        text = report.format()
        replayed = report.not_replayed is None  # under FSDP, neither a replay nor a save of the whole parameters
        if state.precision is not None and replayed:  # under autocast: where the values leave the low-precision range
            text += "\n" + diagnose_step(state, rng_state).format()
        saved = save_offending_step(state, rng_state, text) if replayed else None
        prefix = state.config.get("model")
        newest = checkpoint.list_checkpoints(prefix) if prefix else {}
        last = f"the last checkpoint ({newest[max(newest)]}) is intact" if newest else "no checkpoint was written yet"
        context = f" after {self.allowed_invalid} skipped updates" if self.allowed_invalid else ""
        if not report.reproduced and replayed:
            context += (
                " (the replay with the same batch, parameters and RNG state was clean: the failure is not "
                "deterministic, e.g. uninitialized memory or randomness outside torch's seeded RNGs, or a "
                "float32 overflow in the fast check's sums)"
            )
        files = state.config.command_args() or "CONFIG"
        if saved:
            where = (
                f"\nSaved batch, parameters and RNG state of the step to {saved}; replay it with:\n"
                f"    framework-replay-step {files} {saved}"
            )
        elif replayed:
            where = "\nSet the 'model' option to keep the offending batch for replay."
        else:
            where = ""
        on_rank = f" on rank {state.distributed.rank}" if state.distributed is not None else ""
        if report.params:
            stopped = (
                f"Stopped before the optimizer step, but the parameters were non-finite already: an earlier update "
                f"applied non-finite gradients while its loss was finite, or they were loaded or initialized so; "
                f"{last}. The default check reads the losses only; rerun with "
                f"debug_add_check_numerics_on_output = True, which also checks the gradients of every step and "
                f"names the op whose backward made them non-finite"
            )
        else:
            stopped = f"Stopped before the optimizer step: the parameters are untouched and {last}"
        error = NonFiniteError(
            f"Non-finite values{on_rank} in training step {state.step_in_epoch} of epoch {state.epoch} (global step "
            f"{state.global_step}){context}. {stopped}.\n{text}{where}"
        )
        error.step = {name: getattr(state, name) for name in _STEP_FIELDS}  # the run stopped at this step
        error.where = report.where() or None
        raise error


def _floating(value: Any) -> list[torch.Tensor]:
    """``floating_tensors(value)``, with the common module arguments and outputs (a tensor, a tuple of one) first."""
    if isinstance(value, tuple) and len(value) == 1:
        value = value[0]
    if isinstance(value, torch.Tensor):
        return [value] if value.is_floating_point() else []
    return floating_tensors(value)


def _grad_sums(state: RunState) -> list[torch.Tensor]:
    """The float32 sum of each gradient (this rank's slices under FSDP), on the device: non-finite exactly when
    the gradient is (or, for a finite one, when its sum overflows, beyond 3.4e38, where a 2-norm overflows
    beyond 1.8e19). One pass over each gradient, as cheap as ``torch._foreach_norm`` on the CPU."""
    grads = [stored(p.grad) for p in state.model.parameters() if p.grad is not None]
    return [g.sum(dtype=torch.float32) for g in grads]


def _read_finite(values: list[torch.Tensor]) -> bool:
    """Whether every one of ``values`` (scalars on the device) is finite: one read of them all (syncs)."""
    return all(map(math.isfinite, torch.stack(values).tolist())) if values else True


def _finite_normalized(marked: MarkedLoss) -> bool:
    """Whether ``marked.normalized()`` is finite, from the step's host read of the loss (a factor of 0 is not)."""
    value, norm = marked.host_values()
    return math.isfinite(value) and (norm is None or (math.isfinite(norm) and norm != 0))


def _nonfinite(values: list[torch.Tensor]) -> torch.Tensor:
    """1.0 where one of ``values`` is NaN or Inf, else 0.0: a float32 flag on the device, as fused optimizers
    take it (``found_inf``). Two or three dispatches: ``0 * x`` is 0 for a finite ``x`` and NaN otherwise, and
    sums of zeros never overflow."""
    if not values:
        return torch.zeros(())
    zeros = values[0].mul(0) if len(values) == 1 else torch.stack(values).mul(0).sum()
    flag = zeros.nan_to_num(nan=1.0)
    return flag if flag.dtype == torch.float32 else flag.float()


def _raise_for_other_ranks(state: RunState, ranks: list[int]) -> None:
    names = ", ".join(str(r) for r in ranks)
    error = NonFiniteError(
        f"Non-finite values on rank {names} in training step {state.step_in_epoch} of epoch "
        f"{state.epoch} (global step {state.global_step}): all ranks stopped before the optimizer step, "
        f"the parameters are untouched. The report is in the output of rank {names}."
    )
    error.peers_reporting = tuple(ranks)
    raise error


def _what_is_bad(state: RunState, grad_norms: dict[str, torch.Tensor] | None, culprits: list[Any] = ()) -> str:
    """Which losses, gradients and outputs of the step in ``state`` are non-finite (reads them: only on failure)."""
    losses = [n for n, value in step_losses(state.run_ctx).items() if not bool(torch.isfinite(value))]
    if grad_norms is not None:  # norms kept from the step: the gradients themselves belong to a later step by now
        params = [n for n, norm in grad_norms.items() if not bool(torch.isfinite(norm))]
    else:
        params = [
            n
            for n, p in state.model.named_parameters()
            if p.grad is not None and not bool(torch.isfinite(stored(p.grad)).all())
        ]
    parts = []
    if losses:
        parts.append(f"loss {', '.join(losses)}")
    if params:
        parts.append(f"gradient of {', '.join(params[:5])}" + (" ..." if len(params) > 5 else ""))
    if culprits:
        parts.append(f"output of {', '.join(map(str, culprits[:3]))}")
    return "; ".join(parts) or "module/op outputs"


def save_offending_step(state: RunState, rng_state: dict[str, Any], report: str) -> str | None:
    """Write batch, sequence indices, parameters and RNG state of the step beside the checkpoints."""
    prefix = state.config.get("model")
    if not prefix:
        return None
    path = f"{prefix}.nonfinite.ep{state.epoch:03d}.step{state.global_step}.pt"
    checkpoint.save_checkpoint(
        path,
        {
            "batch": {k: v.detach().cpu() for k, v in state.batch.items()},
            "seq_indices": torch.as_tensor(state.batch_indices),
            "rng": saveable_rng(rng_state),
            "epoch": state.epoch,
            "global_step": state.global_step,
            "model": {k: v.detach().cpu() for k, v in state.model.state_dict().items()},
            "report": report,
            "config_files": [os.path.abspath(f) for f in state.config.files],
        },
    )
    return path


PLUGINS = (NumericsGuard,)
