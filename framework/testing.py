"""Assertions for your own pytest suites: the framework's model checks, one call each.

    from framework import testing

    def test_my_model_trains():
        case = testing.from_config("configs/my_config.py")  # model, first train batch, train_step
        testing.assert_gradients_reach_all_params(case.model, case.batch, case.train_step)
        testing.assert_params_change(case.model, case.batch, case.train_step, frozen=["encoder.*"])
        testing.assert_can_overfit(case.model, case.batch, case.train_step)

``train_step`` is a config's ``train_step(*, model, extern_data, run_ctx)`` that marks losses,
or any ``fn(model, batch)`` that returns the loss. Each failure names the module, parameter or
tensor entry. Every value of every tensor is checked: a partly-Inf output fails.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from typing import Any

import torch
from torch import nn

from framework.base.util import accepted_kwargs
from framework.check_library.model_checks import (
    ROOT,
    by_module,
    capture_outputs,
    gradient_findings,
    range_findings,
)
from framework.check_library.module_tracker import ModuleTracker, matches_any
from framework.check_library.tensors import iter_tensors
from framework.core.run_ctx import RunCtx
from framework.core.step import call_step
from framework.tooling import ConfigCase, load_case

__all__ = [
    "ConfigCase",
    "assert_can_overfit",
    "assert_gradients_reach_all_params",
    "assert_no_nonfinite",
    "assert_output_range",
    "assert_params_change",
    "from_config",
    "step_loss",
]


def step_loss(model: nn.Module, batch: Any, train_step: Callable[..., Any]) -> torch.Tensor:
    """The loss to optimize of one forward pass of ``train_step`` on ``batch``."""
    accepted = accepted_kwargs(train_step)
    if accepted is None or "run_ctx" in accepted:
        run_ctx = RunCtx(stage="train", epoch=1, step=0, batch=batch)
        returned = call_step(train_step, model, run_ctx)
        if run_ctx.losses:
            return run_ctx.total_loss()
    else:
        returned = train_step(model, batch)
    if not isinstance(returned, torch.Tensor):
        raise TypeError("train_step neither marked a loss (run_ctx.mark_as_loss) nor returned a loss tensor")
    return returned


def assert_gradients_reach_all_params(
    model: nn.Module, batch: Any, train_step: Callable[..., Any], *, frozen: Iterable[str] = ()
) -> None:
    """One forward/backward: every parameter not matching ``frozen`` requires grad and gets a nonzero gradient."""
    model.zero_grad(set_to_none=True)
    step_loss(model, batch, train_step).backward()
    findings = gradient_findings(model, list(frozen))
    model.zero_grad(set_to_none=True)
    if findings:
        raise AssertionError(" ".join(f.message for f in findings))


def assert_params_change(
    model: nn.Module,
    batch: Any,
    train_step: Callable[..., Any],
    *,
    optimizer: torch.optim.Optimizer | None = None,
    frozen: Iterable[str] = (),
    steps: int = 1,
) -> None:
    """After ``steps`` updates (Adam, lr 1e-3 unless given), every parameter changed except the ``frozen`` ones."""
    frozen = list(frozen)
    params = dict(model.named_parameters())
    before = {n: p.detach().clone() for n, p in params.items()}
    optimizer = optimizer or torch.optim.Adam([p for p in params.values() if p.requires_grad], lr=1e-3)
    for _ in range(steps):
        optimizer.zero_grad(set_to_none=True)
        step_loss(model, batch, train_step).backward()
        optimizer.step()
    same = {n for n, p in params.items() if torch.equal(p.detach(), before[n])}
    stuck = [n for n in params if n in same and not matches_any(n, frozen)]
    moved = [n for n in params if n not in same and matches_any(n, frozen)]
    problems = []
    if stuck:
        problems.append(f"{by_module(model, stuck)} did not change in {steps} update(s).")
    if moved:
        problems.append(f"{by_module(model, moved)} changed although frozen ({', '.join(frozen)}).")
    if problems:
        raise AssertionError(" ".join(problems))


def assert_no_nonfinite(
    model_or_value: Any, batch: Any = None, train_step: Callable[..., Any] | None = None, *, backward: bool = True
) -> None:
    """No NaN/Inf anywhere: in a tensor (or nested tuple/list/dict), or in a step's module outputs, loss and gradients.

    With a model, batch and train_step: one forward (and backward), naming the first module whose
    output is non-finite, else the loss, else the parameters with non-finite gradients.
    """
    if not isinstance(model_or_value, nn.Module):
        for i, t in enumerate(iter_tensors(model_or_value)):
            _check_finite(t, f"tensor {i}" if not isinstance(model_or_value, torch.Tensor) else "tensor")
        return
    model = model_or_value
    first_bad: list[str] = []

    def on_output(name: str, module: nn.Module, args: tuple, output: Any) -> None:
        for t in iter_tensors(output):
            if not first_bad and _nonfinite_count(t):
                first_bad.append(
                    f"module '{name}' ({type(module).__name__}) is the first module (in execution order) with a "
                    f"NaN/Inf output: {_nonfinite_count(t)} of {t.numel()} values of its {list(t.shape)} output."
                )

    model.zero_grad(set_to_none=True)
    with ModuleTracker(model, post_hook=on_output):
        loss = step_loss(model, batch, train_step)
    if first_bad:
        raise AssertionError(first_bad[0])
    _check_finite(loss, "the loss")
    if backward:
        loss.backward()
        bad = [n for n, p in model.named_parameters() if p.grad is not None and _nonfinite_count(p.grad)]
        model.zero_grad(set_to_none=True)
        if bad:
            raise AssertionError(f"{by_module(model, bad)} have NaN/Inf gradients (outputs and loss are finite).")


def assert_output_range(model: nn.Module, inputs: Any, low: float, high: float, *, module: str | None = None) -> None:
    """Every value of the output of ``module`` (a path such as ``decoder.out``; default the model) is in [low, high].

    ``inputs`` is a tensor (``model(inputs)``), a tuple (``model(*inputs)``) or a dict (``model(**inputs)``).
    """
    name = module or ROOT
    with capture_outputs(model, [name]) as captured:
        if isinstance(inputs, dict):
            model(**inputs)
        elif isinstance(inputs, tuple):
            model(*inputs)
        else:
            model(inputs)
    findings = range_findings(model, {name: (low, high)}, captured)
    if not captured.get(name) and not findings:
        raise AssertionError(f"module '{name}' was not called (or returned no floating tensor).")
    if findings:
        raise AssertionError(" ".join(f.message for f in findings))


def assert_can_overfit(
    model: nn.Module,
    batch: Any,
    train_step: Callable[..., Any],
    *,
    steps: int = 200,
    optimizer: torch.optim.Optimizer | None = None,
    loss_ratio: float = 0.05,
) -> None:
    """Training ``steps`` steps on ``batch`` alone (Adam, lr 1e-2 unless given) brings the loss to ``loss_ratio`` of its start."""
    optimizer = optimizer or torch.optim.Adam([p for p in model.parameters() if p.requires_grad], lr=1e-2)
    losses = []
    for _ in range(steps):
        optimizer.zero_grad(set_to_none=True)
        loss = step_loss(model, batch, train_step)
        loss.backward()
        optimizer.step()
        losses.append(float(loss.detach()))
    first, final = losses[0], losses[-1]
    if not (math.isfinite(final) and final <= loss_ratio * first):
        marks = sorted({0, steps // 4, steps // 2, 3 * steps // 4, steps - 1})
        curve = ", ".join(f"step {i}: {losses[i]:.4g}" for i in marks)
        raise AssertionError(
            f"the model does not overfit one batch: the loss went from {first:.4g} to {final:.4g} in {steps} steps "
            f"(needs x{loss_ratio:g}; {curve})."
        )


def bitwise_equal(a: Any, b: Any) -> bool:
    """Whether two nested states (dicts, lists, tuples of tensors and plain values: a checkpoint, an optimizer's
    or a plugin's state) are equal bit for bit, tensors of the same dtype and shape included."""
    if isinstance(a, torch.Tensor):
        return isinstance(b, torch.Tensor) and a.dtype == b.dtype and a.shape == b.shape and torch.equal(a, b)
    if isinstance(a, dict):
        return isinstance(b, dict) and a.keys() == b.keys() and all(bitwise_equal(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)):
        return isinstance(b, (list, tuple)) and len(a) == len(b) and all(map(bitwise_equal, a, b))
    return a == b


# Recorded options that name where a run writes: two runs compared entry by entry write to different places.
OUTPUT_OPTIONS = ("model", "log", "tensorboard_dir", "output_dir")


def checkpoint_differences(a: dict[str, Any], b: dict[str, Any]) -> list[str]:
    """The entries of two checkpoints that are not bitwise equal: every entry (scores, learning-rate state and
    options included), the recorded options less those that say where each run writes (``OUTPUT_OPTIONS``)."""
    differ = []
    for key in sorted(set(a) | set(b), key=str):
        first, second = a.get(key), b.get(key)
        if key == "options" and isinstance(first, dict) and isinstance(second, dict):
            first, second = ({k: v for k, v in o.items() if k not in OUTPUT_OPTIONS} for o in (first, second))
        if key not in a or key not in b or not bitwise_equal(first, second):
            differ.append(str(key))
    return differ


def _nonfinite_count(t: torch.Tensor) -> int:
    return int((~torch.isfinite(t)).sum()) if t.is_floating_point() or t.is_complex() else 0


def _check_finite(t: torch.Tensor, what: str) -> None:
    count = _nonfinite_count(t)
    if count:
        mask = ~torch.isfinite(t)
        index = tuple(torch.nonzero(mask)[0].tolist())
        kinds = "+".join(k for k, m in (("NaN", torch.isnan(t)), ("Inf", torch.isinf(t))) if m.any())
        raise AssertionError(
            f"{what} ({list(t.shape)}) has {count} of {t.numel()} values {kinds}, first at index {index}."
        )


def from_config(*files: str, **overrides: Any) -> ConfigCase:
    """Load config ``files`` (with ``overrides`` as with ``++key value``) and build model and first batch on CPU."""
    return load_case(list(files), overrides)
