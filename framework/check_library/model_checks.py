"""Checks of a model after a forward/backward: which losses, parameters and modules are not trained.

Shared by the sanity check on the first training step, the gradient-health check and
``framework.testing``. Findings are grouped by module, so that a disconnected layer is one
line naming the module and its parameters, not one line per tensor.
"""

from __future__ import annotations

import contextlib
import inspect
import math
from collections.abc import Iterator
from typing import Any

import torch
from torch import nn

from framework.base.findings import Finding
from framework.check_library import sharded
from framework.check_library.freezes import freeze_origin
from framework.check_library.module_tracker import matches_any
from framework.check_library.tensors import display_path, floating_tensors, format_frame

ROOT = "(model)"

# Gradient judgments that depend on the initialisation wait this many updates after step 0: a
# zero-initialised norm weight, gate or residual branch blocks the gradient of what comes before it
# only until its own first update, and a gradient that is tiny by design grows as training moves.
SETTLE_UPDATES = 8


def by_module(model: nn.Module, names: list[str], limit: int = 6) -> str:
    """``module 'enc.1' (Linear): weight, bias; module 'head' (Linear): weight`` for parameter names."""
    modules = dict(model.named_modules())
    groups: dict[str, list[str]] = {}
    for name in names:
        path, _, leaf = name.rpartition(".")
        groups.setdefault(path, []).append(leaf)
    shown = [
        f"module '{path or ROOT}' ({type(modules.get(path)).__name__}): {', '.join(leaves)}"
        for path, leaves in list(groups.items())[:limit]
    ]
    more = len(groups) - limit
    return "; ".join(shown) + (f"; and {more} more modules (last: '{list(groups)[-1]}')" if more > 0 else "")


def named(names: list[str]) -> dict[str, Any]:
    """A finding's ``where`` for parameters: their modules (``(model)`` for the root's own) and names."""
    modules = list(dict.fromkeys(name.rpartition(".")[0] or ROOT for name in names))
    return {"modules": modules, "parameters": list(names)}


def loss_findings(losses: dict[str, Any]) -> list[Finding]:
    """Optimized losses (``MarkedLoss``) that do not depend on any parameter requiring grad."""
    optimized = {name: m for name, m in losses.items() if not m.as_error}
    detached = [name for name, m in optimized.items() if not m.loss.requires_grad]
    if not detached:
        return []
    names = ", ".join(repr(n) for n in detached)
    return [
        Finding(
            "error" if len(detached) == len(optimized) else "warning",
            "sanity check",
            f"loss {names} does not depend on any parameter that requires grad (it has no grad_fn), so "
            f"{'nothing can be trained' if len(detached) == len(optimized) else 'it trains nothing'}. Look for .detach(), "
            f".item(), .numpy(), torch.no_grad() or a tensor rebuilt with torch.tensor(...) between the model "
            f"output and mark_as_loss.",
            evidence={"detached": detached, "optimized": list(optimized)},
            where={"losses": detached},
            fix="Compute the loss from the model's output without .detach(), .item(), .numpy(), torch.no_grad() or "
            "torch.tensor(...) on the way.",
        )
    ]


def gradient_findings(
    model: nn.Module,
    frozen: list[str],
    optimizer: Any = None,
    *,
    zero_gradients: bool = True,
    unused: bool = True,
    fixed: frozenset[str] = frozenset(),
    idle: frozenset[str] = frozenset(),
) -> list[Finding]:
    """After backward: parameters frozen by mistake, without gradient, with an all-zero gradient, not optimized.

    ``zero_gradients=False`` leaves the all-zero gradients out: a caller that can watch later steps
    judges them there (``zero_gradient_names``), since a zero gradient at step 0 is often the
    initialisation's design (``zero_gradient_finding``). ``unused=False`` likewise leaves out the
    parameters without a gradient while others got one (``unused_finding``): what one step skips
    (LayerDrop, stochastic depth, an idle expert of a top-1 mixture) is used by others. ``fixed``: frozen
    parameters whose modules the step ran only under ``torch.no_grad()`` or in eval mode (a distillation
    teacher, a frozen feature extractor), or before a module with trainable parameters (a frozen backbone under
    a trained head, the frozen base of an adapter): frozen by design, a note. A frozen module after which nothing
    trainable runs (an output layer left at its initialisation) is what a mistake looks like. ``idle``: frozen
    parameters of modules the step did not run at all (a copy kept beside the model, EMA weights for evaluation):
    freezing them changes nothing in training, a note.
    """
    params = dict(model.named_parameters())
    trainable = {n: p for n, p in params.items() if p.requires_grad}
    findings = []
    origins = {n: freeze_origin(p) for n, p in params.items() if not p.requires_grad and not matches_any(n, frozen)}
    mistaken = [
        n for n, origin in origins.items() if (origin is None or not origin.by_design) and n not in fixed | idle
    ]
    if idle & origins.keys():
        findings.append(
            Finding(
                "note",
                "sanity check",
                f"{by_module(model, [n for n in origins if n in idle])} do not require grad and did not run in the "
                f"first training step: kept beside the trained model (EMA weights, a copy for evaluation); they would "
                f"get no gradient either way.",
                evidence={"idle": sum(n in idle for n in origins)},
                where=named([n for n in origins if n in idle]),
            )
        )
    if fixed & origins.keys():
        frames = [origins[n].frame for n in origins if n in fixed and origins[n] is not None and origins[n].frame]
        findings.append(
            Finding(
                "note",
                "sanity check",
                f"{by_module(model, [n for n in origins if n in fixed])} do not require grad and ran only under "
                f"torch.no_grad(), in eval mode or before trained layers: a fixed part by design (a teacher, a frozen "
                f"feature extractor, an adapter's base)"
                + (f", frozen at {format_frame(frames[0])}." if frames else "."),
                evidence={"fixed": sum(n in fixed for n in origins)},
                where={
                    **named([n for n in origins if n in fixed]),
                    **({"frozen_at": format_frame(frames[0])} if frames else {}),
                },
            )
        )
    if mistaken:
        lines = [origins[n].frame for n in mistaken if origins[n] is not None and origins[n].frame is not None]
        cause = f"frozen at {format_frame(lines[0])}" if lines else "requires_grad_(False) somewhere"
        findings.append(
            Finding(
                "warning",
                "sanity check",
                f"{by_module(model, mistaken)} do not require grad, but frozen_params does not list them: frozen by "
                f"mistake ({cause})? If they are meant to be frozen, add them to frozen_params.",
                evidence={"frozen": len(mistaken)},
                where={**named(mistaken), **({"frozen_at": format_frame(lines[0])} if lines else {})},
                fix="Remove the requires_grad_(False) that froze them, or list them in frozen_params if meant.",
            )
        )
    no_grad = [n for n, p in trainable.items() if p.grad is None and not matches_any(n, frozen)]
    if no_grad and all(p.grad is None for p in trainable.values()):
        findings.append(
            Finding(
                "error",
                "sanity check",
                "No parameter received a gradient: the loss is not connected to the model (e.g. "
                "loss.detach().requires_grad_(), or the model's output detached before the loss).",
                evidence={"trainable": len(trainable), "with_gradient": 0},
                where={"modules": [ROOT]},
                fix="Compute the loss from the model's output without detaching it.",
            )
        )
    elif no_grad and unused:
        findings.append(unused_finding(model, no_grad))
    if zero_gradients:
        zero = zero_gradient_names(model, frozen)
        if zero:
            findings.append(zero_gradient_finding(model, zero, zero_valued_names(model)))
    frozen_trained = [n for n, p in trainable.items() if p.grad is not None and matches_any(n, frozen)]
    if frozen_trained:
        findings.append(
            Finding(
                "warning",
                "sanity check",
                f"frozen_params lists {by_module(model, frozen_trained)}, but they require grad and get a gradient, so "
                f"the optimizer will change them. Call requires_grad_(False) on them in get_model.",
                evidence={"frozen_but_trained": len(frozen_trained), "frozen_params": list(frozen)},
                where=named(frozen_trained),
                fix="Call requires_grad_(False) on them in get_model.",
            )
        )
    if optimizer is not None:
        findings += optimizer_findings(model, optimizer)
        optimized = optimized_ids(optimizer)
        left_out = [n for n, p in trainable.items() if id(p) not in optimized and not matches_any(n, frozen)]
        if left_out:
            findings.append(
                Finding(
                    "warning",
                    "sanity check",
                    f"{by_module(model, left_out)} require grad but are in no optimizer param group, so they never "
                    f"change. Is the optimizer built from a subset of the parameters?",
                    evidence={"left_out": len(left_out), "trainable": len(trainable)},
                    where=named(left_out),
                    fix="Build the optimizer over all of model.parameters(), or list these in frozen_params.",
                )
            )
    return findings


def unused_finding(model: nn.Module, names: list[str], *, updates: int = 0, optimizer: Any = None) -> Finding:
    """``names`` got no gradient: at this step (``updates`` 0), or at step 0 and every one of the next ``updates``.
    ``optimizer``: the run's (several optimizers may leave parameters untrained because no loss is marked for
    theirs)."""
    when = f" at step 0 nor in any of the {updates} updates after it" if updates else ""
    evidence: dict[str, Any] = {}
    cause = unmarked_cause(optimizer, model, names, evidence) or (
        ": not connected to the loss (defined but not used in forward, or its output goes through .detach() / "
        "torch.no_grad()). Remove what is unused, or list it in frozen_params"
    )
    evidence["updates"] = updates
    fix = (
        f"Mark the loss meant to train them with optimizer={evidence['optimizers'][0]!r}, or list them in frozen_params."
        if "optimizers" in evidence
        else "Connect them to the loss, remove them if unused, or list them in frozen_params."
    )
    return Finding(
        "warning",
        "sanity check",
        f"{by_module(model, names)} receive no gradient{when}{cause}.",
        evidence=evidence,
        where=named(names),
        fix=fix,
    )


def several_optimizers(optimizer: Any) -> bool:
    r"""Whether the run trains with several optimizers (param groups that name different ``optimizer``\ s): a game
    (GAN, actor-critic), whose summed loss need not fall."""
    return optimizer is not None and len({g.get("optimizer") for g in optimizer.param_groups}) > 1


def parameter_optimizers(optimizer: Any, model: nn.Module) -> dict[str, str]:
    """Parameter name -> the optimizer (of several: its param groups name their ``optimizer``) that holds it; empty
    with one optimizer."""
    ids = {id(p): n for n, p in model.named_parameters()}
    return {
        ids[id(p)]: group["optimizer"]
        for group in getattr(optimizer, "param_groups", [])
        if "optimizer" in group
        for p in group["params"]
        if id(p) in ids
    }


def unmarked_cause(optimizer: Any, model: nn.Module, names: list[str], evidence: dict[str, Any]) -> str | None:
    """With several optimizers (param groups that name their ``optimizer``; the set's ``marked_for``: per optimizer
    the losses marked for it so far): when every parameter of ``names`` belongs to an optimizer no loss was marked
    for, that, with the losses that were marked, as the cause (``: ...``, filling ``evidence``); None otherwise."""
    marked_for = getattr(optimizer, "marked_for", None)
    if marked_for is None:
        return None
    owner = parameter_optimizers(optimizer, model)
    owners = sorted({owner.get(n) for n in names}, key=str)
    if None in owners or any(marked_for.get(o) for o in owners):
        return None
    marked = {o: sorted(losses) for o, losses in sorted(marked_for.items()) if losses}
    # The problem's key: the sanity check, the gradient health and the diagnosis each find it, reported once.
    problem = f"no loss marked for optimizer {', '.join(repr(o) for o in owners)}"
    evidence.update({"optimizers": owners, "losses marked": marked, "problem": problem})
    which = ", ".join(repr(o) for o in owners)
    losses = "; ".join(f"{', '.join(n)} for {o!r}" for o, n in marked.items()) or "none"
    return (
        f": they belong to optimizer {which}, and no loss was marked for it (marked: {losses}), so nothing trains "
        f"them. Mark the loss meant to train them with optimizer={owners[0]!r}, or list them in frozen_params"
    )


def optimized_ids(optimizer: Any) -> set[int]:
    """The ids of the tensors in the optimizer's param groups."""
    return {id(p) for group in optimizer.param_groups for p in group["params"]}


def overridden_at(optimizer: Any, method: str) -> str | None:
    """Where the optimizer's class defines its own ``method`` (``zero_grad``, ``step``); None: torch's own. Of
    several optimizers (a set with ``optimizers``, by name), the first of them that defines its own."""
    members = getattr(optimizer, "optimizers", None)
    if isinstance(members, dict):
        return next(filter(None, (overridden_at(member, method) for member in members.values())), None)
    function = inspect.unwrap(getattr(type(optimizer), method))  # torch wraps step() for its hooks
    if getattr(function, "__module__", "").startswith("torch."):
        return None
    try:
        return f"{display_path(inspect.getsourcefile(function))}:{inspect.getsourcelines(function)[1]}"
    except (OSError, TypeError):
        return type(optimizer).__qualname__


def optimizer_findings(model: nn.Module, optimizer: Any) -> list[Finding]:
    """Tensors the optimizer updates twice, or that are not the model's parameters (another copy's)."""
    names = {id(p): n for n, p in model.named_parameters()}
    counts: dict[int, int] = {}
    foreign = []
    for group in optimizer.param_groups:
        for p in group["params"]:
            counts[id(p)] = counts.get(id(p), 0) + 1
            if id(p) not in names and counts[id(p)] == 1:
                foreign.append(p)
    findings = []
    twice = [names[i] for i, n in counts.items() if n > 1 and i in names]
    if twice:
        findings.append(
            Finding(
                "warning",
                "sanity check",
                f"{by_module(model, twice)} are listed more than once in the optimizer's param groups, so every "
                f"update changes them more than once (with momentum state mixed between the copies). List each "
                f"parameter in one group.",
                evidence={"listed_twice": len(twice)},
                where=named(twice),
                fix="List each parameter in one param group.",
            )
        )
    if foreign:
        shapes = ", ".join(str(list(p.shape)) for p in foreign[:4]) + (" ..." if len(foreign) > 4 else "")
        findings.append(
            Finding(
                "warning",
                "sanity check",
                f"the optimizer updates {len(foreign)} tensor(s) that are not parameters of the model the step "
                f"trains (shapes {shapes}): an optimizer built over another copy of the model (one made before a "
                f"deepcopy, a reload or a conversion), or over tensors replaced since. The model's own parameters "
                f"are then never changed by it.",
                evidence={"foreign_tensors": len(foreign), "shapes": [list(p.shape) for p in foreign[:4]]},
                where={"optimizer": type(optimizer).__name__},
                fix="Build the optimizer over the parameters of the model that is trained, after any copy or reload.",
            )
        )
    return findings


def zero_gradient_names(model: nn.Module, frozen: list[str]) -> list[str]:
    """The trainable parameters (not ``frozen``) whose gradient, after backward, is exactly zero (one host sync)."""
    with_grad = [
        (n, p.grad)
        for n, p in model.named_parameters()
        if p.requires_grad and p.grad is not None and not matches_any(n, frozen)
    ]
    if not with_grad:
        return []
    norms = sharded.norms([g for _, g in with_grad]).tolist()
    return [n for (n, _), norm in zip(with_grad, norms, strict=True) if norm == 0]


def zero_valued_names(model: nn.Module) -> list[str]:
    """The trainable parameters other than biases whose every entry is exactly zero (one host sync).

    At initialisation these are the design of zero-initialised norms, gates and residual branches
    (timm's ``zero_init_last``, torchvision's ``zero_init_residual``, ReZero, zero convolutions):
    a multiplication by them blocks the gradient of everything before it, until their first update.
    Biases (zero by default, and added, not multiplied) are left out.
    """
    params = [
        (n, p) for n, p in model.named_parameters() if p.requires_grad and p.numel() and n.rpartition(".")[2] != "bias"
    ]
    if not params:
        return []
    norms = sharded.norms([p.detach() for _, p in params]).tolist()
    return [n for (n, _), norm in zip(params, norms, strict=True) if norm == 0]


def zero_gradient_finding(
    model: nn.Module, names: list[str], zero_valued: list[str] | None = None, *, updates: int = 0
) -> Finding:
    """``names`` got an exactly-zero gradient: at step 0 (``updates`` 0) or at every one of the first ``updates``."""
    when = f"at step 0 and in each of the {updates} updates after it" if updates else "(at this step)"
    deduced = _first_step_only(model, names)
    text = f"{by_module(model, names)} get a gradient that is exactly zero {when}" + (
        f".{deduced}"
        if deduced
        else f": dead units (a ReLU that never fires), a multiplication by something that stays zero, or a path "
        f"masked out on {'every batch' if updates else 'this batch'}."
    )
    blocking = [n for n in (zero_valued or []) if n not in names]
    if blocking and not updates:
        text += (
            f" The model has parameters that are exactly zero ({by_module(model, blocking, limit=3)}): a "
            f"zero-initialised norm weight, gate or residual branch blocks the gradient of what comes before it until "
            f"its first update (timm's zero_init_last, torchvision's zero_init_residual); judge after one update."
        )
    return Finding(
        "warning",
        "sanity check",
        text,
        evidence={"zero_gradients": len(names), "updates": updates, "zero_valued": blocking},
        where=named(names),
        fix="Judge after one update if a zero-initialised part blocks them; else look for dead ReLUs, a factor that "
        "stays zero or a mask that drops their path.",
    )


def _first_step_only(model: nn.Module, names: list[str]) -> str:
    """What zero gradients of a recurrent layer's ``weight_hh`` say while its ``weight_ih`` of the same direction gets
    one: its state before the first step is zero, so weight_hh acts from the second step on; the loss reads that
    direction's output at its first step alone (or the layer only gets one-step sequences). For the reverse direction
    of a bidirectional layer, that step is the last position: ``out[:, -1]`` holds it after one element."""
    zero = set(names)
    for path, module in model.named_modules():
        if not isinstance(module, nn.RNNBase):
            continue
        prefix, shown = (f"{path}.", f"{type(module).__name__} {path!r}") if path else ("", type(module).__name__)
        for layer in range(module.num_layers):
            for suffix in ("", "_reverse") if module.bidirectional else ("",):
                hh, ih = f"{prefix}weight_hh_l{layer}{suffix}", f"{prefix}weight_ih_l{layer}{suffix}"
                if hh not in zero or ih in zero:
                    continue
                if suffix:
                    return (
                        f" In {shown}, layer {layer}'s reverse direction gets a gradient into its input weights but "
                        f"none into its recurrent ones: its state before its first step is zero, so the loss reads that "
                        f"direction only after its first step, which for the reverse direction is the last position "
                        f"of the sequence (unless every sequence it gets is one step long). Reading the output at the "
                        f"last time step (out[:, -1]) of a bidirectional layer gives the backward direction after one "
                        f"element; take its final state (h_n, or out[:, 0]'s reverse half) instead."
                    )
                return (
                    f" In {shown}, layer {layer}'s recurrent weights get no gradient while its input weights do: its "
                    f"state before the first step is zero, so the loss reads its output only at the first step "
                    f"(out[:, 0]), before any recurrence, or every sequence it gets is one step long; read the output "
                    f"after the sequence (h_n, or the last real step), or give it the sequence along its time axis."
                )
    return ""


@contextlib.contextmanager
def capture_outputs(model: nn.Module, patterns: list[str]) -> Iterator[dict[str, list[torch.Tensor]]]:
    """Collect the floating outputs of the modules whose path matches a pattern (``(model)`` = the root)."""
    captured: dict[str, list[torch.Tensor]] = {}
    handles = []
    for path, module in model.named_modules():
        name = path or ROOT
        if matches_any(name, patterns):

            def hook(_module: nn.Module, _args: Any, output: Any, name: str = name) -> None:
                captured.setdefault(name, []).extend(t.detach() for t in floating_tensors(output))

            handles.append(module.register_forward_hook(hook))
    try:
        yield captured
    finally:
        for handle in handles:
            handle.remove()


@contextlib.contextmanager
def top_level_calls(model: nn.Module) -> Iterator[list[tuple[str, Any]]]:
    """Within the block, the calls the step makes to modules from outside any module's forward, in order:
    ``(module path, its output)`` (``(model)`` = the root)."""
    calls: list[tuple[str, Any]] = []
    depth = [0]
    handles = []
    for path, module in model.named_modules():

        def enter(_module: nn.Module, _args: Any) -> None:
            depth[0] += 1

        def leave(_module: nn.Module, _args: Any, output: Any, name: str = path or ROOT) -> None:
            depth[0] -= 1
            if depth[0] == 0:
                calls.append((name, output))

        handles += [module.register_forward_pre_hook(enter), module.register_forward_hook(leave, always_call=True)]
    try:
        yield calls
    finally:
        for handle in handles:
            handle.remove()


def range_findings(
    model: nn.Module, ranges: dict[str, tuple[float, float]], captured: dict[str, list[torch.Tensor]]
) -> list[Finding]:
    """Captured outputs outside their declared ``(low, high)``; patterns that matched no module."""
    findings = []
    names = [path or ROOT for path, _ in model.named_modules()]
    for pattern, (low, high) in ranges.items():
        matched = [n for n in names if matches_any(n, [pattern])]
        if not matched:
            findings.append(
                Finding(
                    "warning",
                    "sanity check",
                    f"debug_output_ranges: {pattern!r} matches no module (modules: {', '.join(names[:12])}).",
                    evidence={"modules": len(names)},
                    where={"option": "debug_output_ranges", "pattern": pattern},
                    fix="Use a module path pattern of the model (fnmatch, as printed by the model summary).",
                )
            )
        for name in matched:
            for t in captured.get(name, []):
                if t.numel() == 0:
                    continue
                finite = torch.isfinite(t)
                values = t[finite]
                lo, hi = (float(values.min()), float(values.max())) if values.numel() else (math.nan, math.nan)
                if finite.all() and low <= lo and hi <= high:
                    continue
                outside = int((~finite | (t < low) | (t > high)).sum())
                findings.append(
                    Finding(
                        "warning",
                        "sanity check",
                        f"module '{name}' output ({list(t.shape)}) has {outside} of {t.numel()} values outside its "
                        f"declared range [{low:g}, {high:g}] (finite values span [{lo:.4g}, {hi:.4g}]"
                        f"{', plus NaN/Inf' if not finite.all() else ''}): a missing or extra sigmoid/softmax?",
                        evidence={
                            "outside": outside,
                            "values": t.numel(),
                            "min": lo,
                            "max": hi,
                            "declared": [low, high],
                        },
                        where={"module": name, "shape": list(t.shape)},
                        fix="Check the module's last activation (a missing or extra sigmoid/softmax), or widen the range.",
                    )
                )
                break
    return findings


def fingerprints(params: list[torch.Tensor]) -> torch.Tensor:
    """[N, 2] float64 sum and norm of each tensor: compared later, they tell which changed, without a copy.
    Of a sharded tensor, over all its slices (a collective under FSDP: every rank calls it with the same tensors)."""
    if not params:
        return torch.zeros(0, 2, dtype=torch.float64)
    rows = torch.stack(
        [
            torch.stack([t.sum(dtype=torch.float64), torch.linalg.vector_norm(t, dtype=torch.float64).square()])
            for t in (sharded.stored(p.detach()) for p in params)
        ]
    )
    rows = sharded.summed_over_shards(rows, params)
    return torch.stack([rows[:, 0], rows[:, 1].sqrt()], dim=1)
