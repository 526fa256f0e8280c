"""Catching NaN/Inf before the optimizer step, then naming the culprit.

Detection is cheap and happens once per step with a single host sync, after backward and
before any update: the optimized losses (``stop_on_nonfinite_train_score``, on by default), and
with the debug flags every module output (``debug_add_check_numerics_on_output``) or every op
output (``debug_add_check_numerics_ops``) plus the gradients. Device-side flags are collected
during the step, so there is no sync per module or op. When a check fails, the step is replayed
with every check on (``replay.py``) to name module, op, source line, parameter and batch
entries; the batch, parameters and RNG state are saved next to the checkpoints, and training
stops with the parameters untouched. ``num_allowed_consec_invalid_gradient_steps`` skips a few
such updates instead.
"""

from __future__ import annotations

import math
import os
from typing import Any

import torch

from framework import checkpoint, log
from framework.debug.module_tracker import ModuleTracker, matches_any
from framework.debug.op_checks import OpSums
from framework.debug.replay import replay_step
from framework.debug.step_sums import Producer, StepSums
from framework.debug.tensors import floating_tensors
from framework.errors import FrameworkError
from framework.events import Event
from framework.rng import get_rng_state

OK, SKIP, STOP = 0, 1, 2  # what a step's check decides; across ranks the largest wins


class NonFiniteError(FrameworkError):
    """Training stopped on NaN/Inf; the message holds the diagnosis."""


class NumericsGuard:
    """Per-step NaN/Inf detection; installed only when one of its options asks for a check."""

    def __init__(self, engine: Any):
        config = engine.config
        self.stop_on_loss = config.bool("stop_on_nonfinite_train_score")
        self.on_output = config.bool("debug_add_check_numerics_on_output")
        self.on_ops = config.bool("debug_add_check_numerics_ops")
        self.nan_only = config.bool("debug_check_numerics_nan_only")
        self.skip_patterns = list(config.get("debug_check_numerics_skip_modules") or [])
        self.allowed_invalid = config.int("num_allowed_consec_invalid_gradient_steps")
        self.check_grads = self.on_output or self.on_ops or self.allowed_invalid > 0
        self.consecutive_invalid = 0
        self.rng_state: dict[str, Any] | None = None
        self.active = False
        self.sums = StepSums(self.nan_only)
        self.tracker: ModuleTracker | None = None
        self.op_sums: OpSums | None = None

    @property
    def wanted(self) -> bool:
        """Whether any option asks for a check."""
        return self.stop_on_loss or self.on_output or self.on_ops or self.allowed_invalid > 0

    def install(self, engine: Any) -> None:
        """Subscribe to the engine's events and hook the model's modules as configured."""
        callbacks = engine.callbacks
        callbacks.on(Event.STEP_START, self.on_step_start)
        callbacks.on(Event.AFTER_BACKWARD, self.on_after_backward)
        callbacks.on(Event.EXCEPTION, self.on_exception)
        if self.on_output:
            for path, module in engine.model.named_modules():
                if not matches_any(path or "(model)", self.skip_patterns):
                    module.register_forward_hook(self._module_hook(path or "(model)"))
        if self.on_ops:
            self.tracker = ModuleTracker(engine.model) if self.skip_patterns else None
            self.op_sums = OpSums(self.sums, self.skip_patterns, self.tracker)

    def _module_hook(self, path: str):
        def record(module: torch.nn.Module, args: tuple, output: Any) -> None:
            if self.active:
                inputs = [self.sums.add_input(t) for t in floating_tensors(args) if t.numel()]
                outputs = [self.sums.add(t) for t in floating_tensors(output) if t.numel()]
                self.sums.producers.append(Producer(path, inputs, outputs))

        return record

    def on_step_start(self, engine: Any) -> None:
        # torch's generators (dropout, randn) replay the step; Python's and numpy's would cost ~100 us
        # per step to capture, and randomness of the data is already in the saved batch.
        self.rng_state = get_rng_state(host=False)
        self.active = True
        if self.op_sums is not None:
            if self.tracker is not None:
                self.tracker.__enter__()
            self.op_sums.__enter__()

    def _leave_step(self) -> None:
        if self.active and self.op_sums is not None:
            self.op_sums.__exit__(None, None, None)
            self.op_sums.clear()
            if self.tracker is not None:
                self.tracker.__exit__(None, None, None)
        self.active = False

    def on_exception(self, engine: Any) -> None:
        self._leave_step()

    def on_after_backward(self, engine: Any) -> None:
        self._leave_step()
        decision, culprits = self._decide(engine)
        if engine.distributed is not None:  # every rank acts on the worst decision of any rank, at the same step
            decisions = torch.zeros(engine.distributed.size, dtype=torch.int64)
            decisions[engine.distributed.rank] = decision
            decisions = engine.distributed.sum(decisions.to(engine.device)).cpu()
            if int(decisions.max()) == STOP and decision != STOP:
                ranks = ", ".join(str(r) for r in torch.nonzero(decisions == STOP).flatten().tolist())
                raise NonFiniteError(
                    f"Non-finite values on rank {ranks} in training step {engine.step_in_epoch} of epoch "
                    f"{engine.epoch} (global step {engine.global_step}): all ranks stopped before the optimizer step, "
                    f"the parameters are untouched. The report is in the output of rank {ranks}."
                )
            decision = max(decision, int(decisions.max()))
        if decision == OK:
            self.consecutive_invalid = 0
            return
        self.consecutive_invalid += 1
        if decision == SKIP:
            engine.skip_update = True
            log.v2(
                f"ep {engine.epoch} step {engine.step_in_epoch} (global {engine.global_step}): non-finite "
                f"{_what_is_bad(engine, culprits)}; update skipped ({self.consecutive_invalid} of "
                f"{self.allowed_invalid} allowed consecutive invalid steps)"
            )
            return
        self._stop(engine)

    def _decide(self, engine: Any) -> tuple[int, list[Any]]:
        """OK, SKIP (an allowed invalid update) or STOP for this step, and the flagged producers."""
        values = [m.normalized().detach() for m in engine.run_ctx.losses.values() if not m.as_error]
        if self.check_grads:
            grads = [p.grad for p in engine.model.parameters() if p.grad is not None]
            values += torch._foreach_norm(grads) if grads else []
        if self._all_finite(values):
            self.sums.clear()
            return OK, []
        culprits = self.sums.culprits()
        self.sums.clear()
        losses_and_grads_finite = all(math.isfinite(v) for v in torch.stack(values).tolist()) if values else True
        if losses_and_grads_finite and (not culprits or not self._confirmed(engine, culprits)):
            return OK, culprits  # infinities passed on from skipped modules, or a false alarm
        return (SKIP if self.consecutive_invalid + 1 <= self.allowed_invalid else STOP), culprits

    def _confirmed(self, engine: Any, culprits: list[Any]) -> bool:
        """Replay a step whose losses and gradients are finite but where an intermediate value was
        flagged: the update would do no harm, so a clean replay means a false alarm of the fast check."""
        if replay_step(engine, self.rng_state, nan_only=self.nan_only, skip_patterns=self.skip_patterns).reproduced:
            return True
        log.v2(
            f"ep {engine.epoch} step {engine.step_in_epoch}: the fast numerics check flagged "
            f"{', '.join(map(str, culprits[:3]))}, but the exact replay of the step is clean; continuing."
        )
        return False

    def _all_finite(self, values: list[torch.Tensor]) -> bool:
        """One host sync for losses, gradient norms and every recorded sum: a sum of terms is finite
        iff each term is (NaN-only mode checks the recorded sums for NaN separately)."""
        terms = values if self.nan_only else values + self.sums.sums
        if not terms:
            return True
        total = terms[0] if len(terms) == 1 else torch.stack([t.float() for t in terms]).sum()
        if self.nan_only and self.sums.sums:
            total = total + torch.where(self.sums.produced_bad_flag(), float("nan"), 0.0)
        return math.isfinite(total.item())

    def _stop(self, engine: Any) -> None:
        report = replay_step(engine, self.rng_state, nan_only=self.nan_only, skip_patterns=self.skip_patterns)
        saved = save_offending_step(engine, self.rng_state, report.format())
        newest = checkpoint.list_checkpoints(engine.config.get("model")) if engine.config.get("model") else {}
        last = f"the last checkpoint ({newest[max(newest)]}) is intact" if newest else "no checkpoint was written yet"
        context = f" after {self.allowed_invalid} skipped updates" if self.allowed_invalid else ""
        if not report.reproduced:
            context += (
                " (the replay with the same batch, parameters and RNG state was clean: the failure is not "
                "deterministic, e.g. uninitialized memory or randomness outside torch's seeded RNGs, or a "
                "float32 overflow in the fast check's sums)"
            )
        files = " ".join(engine.config.files) or "CONFIG"
        if saved:
            where = (
                f"\nSaved batch, parameters and RNG state of the step to {saved}; replay it with:\n"
                f"    python tools/replay-step.py {files} {saved}"
            )
        else:
            where = "\nSet the 'model' option to keep the offending batch for replay."
        on_rank = f" on rank {engine.distributed.rank}" if engine.distributed is not None else ""
        raise NonFiniteError(
            f"Non-finite values{on_rank} in training step {engine.step_in_epoch} of epoch {engine.epoch} (global step "
            f"{engine.global_step}){context}. Stopped before the optimizer step: the parameters are untouched and "
            f"{last}.\n{report.format()}{where}"
        )


def _what_is_bad(engine: Any, culprits: list[Any]) -> str:
    losses = [n for n, m in engine.run_ctx.losses.items() if not bool(torch.isfinite(m.normalized().detach()))]
    params = [
        n for n, p in engine.model.named_parameters() if p.grad is not None and not bool(torch.isfinite(p.grad).all())
    ]
    parts = []
    if losses:
        parts.append(f"loss {', '.join(losses)}")
    if params:
        parts.append(f"gradient of {', '.join(params[:5])}" + (" ..." if len(params) > 5 else ""))
    if culprits:
        parts.append(f"output of {', '.join(map(str, culprits[:3]))}")
    return "; ".join(parts) or "module/op outputs"


def save_offending_step(engine: Any, rng_state: dict[str, Any], report: str) -> str | None:
    """Write batch, sequence indices, parameters and RNG state of the step beside the checkpoints."""
    prefix = engine.config.get("model")
    if not prefix:
        return None
    path = f"{prefix}.nonfinite.ep{engine.epoch:03d}.step{engine.global_step}.pt"
    checkpoint.save_checkpoint(
        path,
        {
            "batch": {k: v.detach().cpu() for k, v in engine.batch.items()},
            "seq_indices": torch.as_tensor(engine.batch_indices),
            "rng": rng_state,
            "epoch": engine.epoch,
            "global_step": engine.global_step,
            "model": {k: v.detach().cpu() for k, v in engine.model.state_dict().items()},
            "report": report,
            "config_files": [os.path.abspath(f) for f in engine.config.files],
        },
    )
    return path
