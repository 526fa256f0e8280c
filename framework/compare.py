"""Comparing two implementations of a model module by module: where do they first disagree?

Both models run on the same batch with the same RNG seed; every module call's floating outputs
are recorded in completion order (innermost first, so the module that *creates* a difference
comes before the modules that pass it on). Modules are paired through the parameter mapping (a
framework module and a reference module whose parameters map onto each other) or, for modules
without parameters, by path after the rename rules. ``bisect`` narrows a diverging pair down to
the first differing aten op, running both modules on the same input.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn
from torch.utils._python_dispatch import TorchDispatchMode

from framework.check_library.module_tracker import ModuleTracker
from framework.check_library.op_checks import op_name
from framework.check_library.tensors import format_frame, iter_tensors, user_frame
from framework.model_import import ParamMapping, apply_rules

ROOT = "(model)"


@dataclass
class Call:
    """One module call: its path, which call of that module it was, its inputs and floating outputs."""

    path: str
    index: int
    module: nn.Module
    args: tuple
    outputs: list[torch.Tensor]


@dataclass
class Row:
    """One compared pair."""

    framework: str
    reference: str
    shape: str
    max_abs: float
    max_rel: float
    match: bool
    call: Call | None = None
    reference_call: Call | None = None


def record_calls(model: nn.Module, run: Callable[[], Any], seed: int) -> tuple[list[Call], Any]:
    """Run ``run()`` with ``seed`` and record every module call of ``model``."""
    calls: list[Call] = []
    counts: dict[str, int] = {}

    def on_output(path: str, module: nn.Module, args: tuple, output: Any) -> None:
        counts[path] = counts.get(path, 0) + 1
        floating = [t.detach().clone() for t in iter_tensors(output) if t.is_floating_point()]
        calls.append(Call(path, counts[path], module, args, floating))

    torch.manual_seed(seed)
    try:
        with ModuleTracker(model, post_hook=on_output):
            result = run()
    except Exception as exc:
        exc.calls = calls  # what ran before the failure can still be compared
        raise
    return calls, result


def pair_modules(framework: nn.Module, reference: nn.Module, mapping: ParamMapping, rules) -> dict[str, str]:
    """Framework module path -> reference module path."""
    to_framework = {r: f for r, f, _ in mapping.pairs}
    fw_sets = {path or ROOT: {n for n, _ in m.named_parameters(prefix=path)} for path, m in framework.named_modules()}
    ref_sets = {}
    for path, module in reference.named_modules():
        names = [n for n, _ in module.named_parameters(prefix=path)]
        if names and all(n in to_framework for n in names):
            ref_sets[path or ROOT] = {to_framework[n] for n in names}
    pairs = {ROOT: ROOT}
    taken = {ROOT}
    for fw_path, names in fw_sets.items():
        if fw_path in pairs or not names:
            continue
        match = next((r for r, s in ref_sets.items() if s == names and r not in taken), None)
        if match is not None:
            pairs[fw_path] = match
            taken.add(match)
    renamed = {apply_rules(path + ".", rules)[:-1]: path for path, _ in reference.named_modules() if path}
    for fw_path in fw_sets:
        if fw_path not in pairs and fw_path in renamed and renamed[fw_path] not in taken:
            pairs[fw_path] = renamed[fw_path]
            taken.add(renamed[fw_path])
    return pairs


def compare_tensors(
    a: list[torch.Tensor], b: list[torch.Tensor], rtol: float, atol: float
) -> tuple[str, float, float, bool]:
    """Shape text, max abs diff, max diff relative to the reference's max |x|, and whether all are close."""
    shapes = ", ".join(str(list(t.shape)) for t in a)
    if len(a) != len(b) or any(x.shape != y.shape for x, y in zip(a, b, strict=False)):
        return f"{shapes} vs {', '.join(str(list(t.shape)) for t in b)}", math.inf, math.inf, False
    max_abs = max_rel = 0.0
    match = True
    for x, y in zip(a, b, strict=True):
        x, y = x.double(), y.double()
        diff = float((x - y).abs().max()) if x.numel() else 0.0
        scale = float(y.abs().max()) if y.numel() else 0.0
        max_abs = max(max_abs, diff)
        max_rel = max(max_rel, diff / scale if scale > 0 else (0.0 if diff == 0 else math.inf))
        match = match and bool(torch.allclose(x, y, rtol=rtol, atol=atol, equal_nan=True))
    return shapes, max_abs, max_rel, match


def compare_calls(
    fw_calls: list[Call], ref_calls: list[Call], pairs: dict[str, str], rtol: float, atol: float
) -> list[Row]:
    """A row for each framework module call that has a paired reference call, in completion order."""
    by_key = {(c.path, c.index): c for c in ref_calls}
    rows = []
    for call in fw_calls:
        ref_path = pairs.get(call.path)
        ref_call = by_key.get((ref_path, call.index)) if ref_path else None
        if ref_call is None or not call.outputs:
            continue
        shape, max_abs, max_rel, match = compare_tensors(call.outputs, ref_call.outputs, rtol, atol)
        label = call.path + (f" (call {call.index})" if call.index > 1 else "")
        rows.append(Row(label, ref_path, shape, max_abs, max_rel, match, call, ref_call))
    return rows


def format_rows(rows: list[Row], what: str = "module") -> str:
    """The comparison table of module outputs (or of gradients: ``what="gradient"``)."""
    header = (f"framework {what}", f"reference {what}", "shape", "max abs diff", "max rel diff", "verdict")
    table = [header] + [
        (r.framework, r.reference, r.shape, f"{r.max_abs:.3g}", f"{r.max_rel:.3g}", "ok" if r.match else "DIFFERS")
        for r in rows
    ]
    widths = [max(len(line[i]) for line in table) for i in range(len(header))]
    return "\n".join("  ".join(cell.ljust(w) for cell, w in zip(line, widths, strict=True)).rstrip() for line in table)


@dataclass
class Op:
    """One aten op of a module's forward: name, floating outputs, source line."""

    name: str
    outputs: list[torch.Tensor]
    where: str


class _OpRecorder(TorchDispatchMode):
    def __init__(self) -> None:
        super().__init__()
        self.ops: list[Op] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        floating = [t.detach().clone() for t in iter_tensors(out) if t.is_floating_point()]
        self.ops.append(Op(op_name(func), floating, format_frame(user_frame())))
        return out


def record_ops(module: nn.Module, args: tuple, seed: int) -> list[Op]:
    """The aten ops of ``module(*args)``, with ``seed``."""
    torch.manual_seed(seed)
    recorder = _OpRecorder()
    with torch.no_grad(), recorder:
        module(*args)
    return recorder.ops


def bisect(row: Row, seed: int, rtol: float, atol: float) -> str:
    """Run both modules of a diverging pair on the framework module's input; name the first differing op."""
    fw_ops = record_ops(row.call.module, row.call.args, seed)
    ref_ops = record_ops(row.reference_call.module, row.call.args, seed)
    lines = [f"Bisect inside {row.framework} vs {row.reference}, both given the framework module's input:"]
    for i, (fw_op, ref_op) in enumerate(zip(fw_ops, ref_ops, strict=False)):
        if fw_op.name != ref_op.name:
            lines.append(f"  ops 0-{i - 1} agree; op {i} differs in kind:" if i else "  op 0 differs in kind:")
            lines.append(f"    framework {fw_op.name} at {fw_op.where}")
            lines.append(f"    reference {ref_op.name} at {ref_op.where}")
            return "\n".join(lines)
        _, max_abs, _, match = compare_tensors(fw_op.outputs, ref_op.outputs, rtol, atol)
        if not match:
            lines.append(
                f"  ops 0-{i - 1} agree; op {i} ({fw_op.name}) gives different values (max abs diff {max_abs:.3g}):"
            )
            lines.append(f"    framework at {fw_op.where}")
            lines.append(f"    reference at {ref_op.where}")
            return "\n".join(lines)
    if len(fw_ops) != len(ref_ops):
        lines.append(
            f"  the first {min(len(fw_ops), len(ref_ops))} ops agree; the framework module runs {len(fw_ops)} ops, the reference {len(ref_ops)}."
        )
    else:
        lines.append(
            "  all ops agree given the same input: the difference comes from the input, i.e. from code between "
            "the paired modules (or a module whose outputs are not compared)."
        )
    return "\n".join(lines)
