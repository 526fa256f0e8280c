"""Localizing non-finite values by replaying one training step with every check on.

The fast paths only detect that a step went wrong. This replays the same step (same batch,
same parameters, same RNG state) with module hooks, an op-level dispatch mode and gradient
hooks, and reports the first module and op that turned finite inputs into NaN/Inf, forward and
backward, and which batch entries carry the bad values.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from framework.base.rng import set_rng_state
from framework.check_library import sharded
from framework.check_library.module_tracker import ModuleTracker, matches_any
from framework.check_library.op_checks import FirstNonFiniteOp, OpFinding, TagAutogradNodes
from framework.check_library.probe import model_copy, parameters_kept
from framework.check_library.tensors import bad_rows, floating_tensors, has_nonfinite, stats
from framework.core.autocast import autocast_factory
from framework.core.run_ctx import RunCtx
from framework.core.step import call_step, step_function


@dataclass
class ModuleFinding:
    """The first module (in order of completion) with finite inputs and a non-finite output."""

    path: str
    cls: str
    inputs: list[str]
    output: str
    rows: list[int]


@dataclass
class NonFiniteReport:
    """What a replay found; ``format()`` is the message the user reads."""

    epoch: int
    global_step: int
    seq_indices: list[int]
    losses: dict[str, float] = field(default_factory=dict)
    batch_keys: dict[str, list[int]] = field(default_factory=dict)
    module: ModuleFinding | None = None
    forward_op: OpFinding | None = None
    param: str | None = None
    backward_op: OpFinding | None = None
    params: list[str] = field(default_factory=list)  # non-finite before the step (an earlier update wrote them)
    not_replayed: str | None = None  # why the step was not replayed (the losses are the step's own)

    @property
    def reproduced(self) -> bool:
        """Whether the replay saw any non-finite value."""
        return bool(
            self.params
            or self.batch_keys
            or self.losses
            or self.module
            or self.forward_op
            or self.param
            or self.backward_op
        )

    def where(self) -> dict[str, Any]:
        """The culprit the replay found, as a finding's ``where``: module, op and its source line, parameter,
        batch keys with non-finite values (empty when it found none)."""
        found: dict[str, Any] = {}
        if self.batch_keys:
            found["batch keys"] = sorted(self.batch_keys)
        if self.params:
            found["parameters non-finite before the step"] = self.params[:5]
        if self.module:
            found["module"] = f"{self.module.path} ({self.module.cls})"
        op = self.forward_op or self.backward_op
        if op is not None:
            found["op"] = op.op
            found["line" if self.forward_op else "backward node"] = op.where if self.forward_op else op.node
            if op.module and "module" not in found:
                found["module"] = op.module
        if self.param and not (self.module or self.forward_op):
            found["parameter"] = self.param
        if self.losses and not found:
            found["losses"] = sorted(self.losses)
        return found

    def _seqs(self, rows: list[int]) -> str:
        if not rows:
            return ""
        chosen = [self.seq_indices[r] for r in rows if r < len(self.seq_indices)]
        shown = ", ".join(map(str, chosen[:10])) + (", ..." if len(chosen) > 10 else "")
        return (
            f"\n    batch entries with non-finite values: {len(rows)} of {len(self.seq_indices)}, "
            f"dataset sequence indices {shown}"
        )

    def format(self) -> str:
        lines = [
            f"Replay of epoch {self.epoch}, global step {self.global_step} "
            f"(batch of {len(self.seq_indices)} sequences):"
        ]
        if self.not_replayed:
            losses = ", ".join(f"{k} = {v}" for k, v in self.losses.items())
            lines[0] = lines[0].replace("Replay of", "Step of", 1)
            lines += [f"  not replayed: {self.not_replayed}"] + ([f"  non-finite losses: {losses}"] if losses else [])
            return "\n".join(lines)
        if not self.reproduced:
            lines.append("  no non-finite values occurred in the replay")
            return "\n".join(lines)
        for key, rows in self.batch_keys.items():
            lines.append(
                f"  the batch itself has non-finite values in {key!r}; fix the data or its preprocessing"
                + self._seqs(rows)
            )
        if self.losses:
            lines.append("  non-finite losses: " + ", ".join(f"{k} = {v}" for k, v in self.losses.items()))
        if self.params:  # what the step computes from them says nothing about where they came from
            shown = ", ".join(self.params[:5]) + (" ..." if len(self.params) > 5 else "")
            lines.append(
                f"  parameters non-finite before this step: {shown} ({len(self.params)} in all); every value computed "
                "from them is non-finite as a consequence"
            )
            return "\n".join(lines)
        if self.module:
            m = self.module
            lines.append(
                f"  forward: first module whose output is non-finite while its inputs are finite: {m.path} ({m.cls})"
            )
            lines += [f"    input {i}: {s}" for i, s in enumerate(m.inputs)]
            lines.append(f"    output:  {m.output}" + self._seqs(m.rows))
        if self.forward_op:
            lines.append("  forward: first op producing non-finite values from finite inputs:")
            lines.append(self.forward_op.format("    ") + self._seqs(self.forward_op.rows))
        if not (self.module or self.forward_op) and self.losses:
            lines.append("  forward: every op and module output was finite until the loss itself")
        if self.batch_keys or self.module or self.forward_op or self.losses:
            if self.param:
                lines.append("  backward: the gradients are non-finite as a consequence of the forward pass")
            return "\n".join(lines)
        if self.param:
            lines.append(f"  backward: first parameter whose gradient is non-finite: {self.param}")
        if self.backward_op:
            lines.append("  backward: first op producing non-finite gradients from finite ones:")
            lines.append(self.backward_op.format("    ") + self._seqs(self.backward_op.rows))
        return "\n".join(lines)


def replay_step(
    state: Any, rng_state: dict[str, Any], *, nan_only: bool = False, skip_patterns: list[str] | None = None
) -> NonFiniteReport:
    """Re-run the current step of ``state`` with detailed checks: a training step forward and backward
    (its gradients are restored after), an evaluation step forward in eval mode."""
    skip_patterns = list(skip_patterns or [])
    if any(sharded.is_sharded(p) for p in state.model.parameters()):
        return _not_replayed(state)
    try:  # training may go on after a clean replay: the user's modules must not notice it
        model = model_copy(state.model)
    except Exception:  # a model that cannot be copied (a lock, a file) is replayed itself, as the step ran it
        model = state.model
    training = state.run_ctx is None or state.run_ctx.stage == "train"
    indices = state.batch_indices if state.batch_indices is not None else np.arange(0)
    report = NonFiniteReport(state.epoch, state.global_step, [int(i) for i in indices])
    report.params = [n for n, p in state.model.named_parameters() if has_nonfinite(p.detach(), nan_only)]
    batch_size = len(report.seq_indices)
    for key, value in (state.batch or {}).items():
        if has_nonfinite(value, nan_only):
            report.batch_keys[key] = bad_rows(value, batch_size, nan_only)

    def check_module(path: str, module: torch.nn.Module, args: tuple, output: Any) -> None:
        if report.module is not None or matches_any(path, skip_patterns):
            return
        outputs = [t for t in floating_tensors(output) if has_nonfinite(t, nan_only)]
        inputs = floating_tensors(args)
        if outputs and not any(has_nonfinite(t, nan_only) for t in inputs):
            report.module = ModuleFinding(
                path,
                type(module).__name__,
                [stats(t) for t in inputs[:4]],
                stats(outputs[0]),
                bad_rows(outputs[0], batch_size, nan_only),
            )

    def check_grad(name: str):
        def hook(grad: torch.Tensor) -> None:
            if report.param is None and has_nonfinite(grad, nan_only):
                report.param = name

        return hook

    saved_grads = {p: p.grad for p in model.parameters()}
    for p in model.parameters():
        p.grad = None
    handles = [p.register_hook(check_grad(n)) for n, p in model.named_parameters() if p.requires_grad]
    tracker = ModuleTracker(model, post_hook=check_module)
    ops = FirstNonFiniteOp(tracker, nan_only, skip_patterns, batch_size)
    set_rng_state(rng_state)
    was_training = model.training
    model.train(training)
    run_ctx = RunCtx(
        stage="train" if training else "eval",
        epoch=state.epoch,
        step=state.global_step,
        batch=state.batch,
        autocast=autocast_factory(getattr(state, "precision", None)),
    )
    # an EMA that the training step moves in place (the copy shares the parameters) is put back after its backward
    with parameters_kept(state.model, "The replay of the step"):
        try:
            with torch.set_grad_enabled(training), tracker, TagAutogradNodes(tracker), ops:
                call_step(step_function(state.config, run_ctx.stage), model, run_ctx)
            for name, marked in run_ctx.losses.items():
                value = marked.normalized().detach()
                if has_nonfinite(value, nan_only):
                    report.losses[name] = float(value)
            if training:
                with ops:
                    run_ctx.total_loss().backward()
        finally:
            model.train(was_training)
            for handle in handles:
                handle.remove()
            for p, grad in saved_grads.items():
                p.grad = grad
    report.forward_op, report.backward_op = ops.forward, ops.backward
    return report


def _not_replayed(state: Any) -> NonFiniteReport:
    """The report of a step of a sharded (FSDP) model: its own non-finite losses, without a replay. A replay on
    one rank would run the model's all-gathers, which the other ranks, stopped, never join."""
    indices = state.batch_indices if state.batch_indices is not None else np.arange(0)
    report = NonFiniteReport(state.epoch, state.global_step, [int(i) for i in indices])
    report.not_replayed = (
        "FSDP shards the model, and a replay on this rank alone would wait for the other ranks' parameter "
        "shards; replay the step in one process from the last checkpoint (same config without 'fsdp')"
    )
    if state.run_ctx is not None:
        for name, marked in state.run_ctx.losses.items():
            value = marked.normalized().detach()
            if has_nonfinite(value, False):
                report.losses[name] = float(value)
    return report
