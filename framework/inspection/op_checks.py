"""Op-level numerics checks: every aten op, forward and backward, via torch dispatch modes.

``OpSums`` is the fast path of ``debug_add_check_numerics_ops``: each op's floating outputs
are reduced to a sum on the device, without a host sync (see ``step_sums``); the step checks
them once. ``FirstNonFiniteOp`` is the slow, exact path used when replaying a failing step: it stops
at nothing but records the first op whose inputs were finite and whose output is not, with
the user's source line; in backward it also names the autograd node and, through the tags that
``TagAutogradNodes`` put on the nodes during forward, the forward op, module and line that the
node differentiates.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode

from framework.inspection.module_tracker import ModuleTracker, skipped_by
from framework.inspection.step_sums import Producer, StepSums
from framework.inspection.tensors import bad_rows, floating_tensors, format_frame, has_nonfinite, stats, user_frame

_ORIGIN = "framework_origin"  # key of our tag in an autograd node's metadata


class OpSums(TorchDispatchMode):
    """Fast path of ``debug_add_check_numerics_ops``: a sum per op output, and which op produced each input.

    Inputs are never re-read: an op's inputs count as finite when the ops that produced them
    had finite outputs; tensors from outside the step (parameters, the batch) count as finite
    (the replay checks them exactly). Views alias their base and are not summed again. Per op
    this is one sum (below autograd: nothing to detach) and a few dictionary lookups, as little
    Python as the dispatch mode itself costs.
    """

    def __init__(self, sums: StepSums, skip_patterns: list[str], tracker: ModuleTracker | None):
        super().__init__()
        self.sums = sums
        self.skip_patterns = skip_patterns
        self.tracker = tracker
        self.producer: dict[int, int] = {}  # id(tensor) -> position of its sum

    @classmethod
    def _should_skip_dynamo(cls) -> bool:
        # torch wraps a mode's __torch_dispatch__ in a dynamo-disabling wrapper that costs every op two more
        # calls; the op check keeps the model eager (EAGER_ONLY), so nothing is compiled under it anyway.
        return False

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        kind = _KINDS.get(func)
        if kind is None:
            kind = _KINDS[func] = _kind(func)
        if kind is _UNINITIALIZED:
            return out
        if isinstance(out, torch.Tensor):
            outs = [out] if out.is_floating_point() and out.numel() else []
        else:
            outs = [t for t in floating_tensors(out) if t.numel()]
        if not outs:
            return out
        producer = self.producer
        parents = _parents(producer, args)
        if kwargs:
            parents += _parents(producer, kwargs.values())
        if kind is _VIEW:
            if parents:
                for t in outs:
                    producer[id(t)] = parents[0]
            return out
        sums = self.sums.sums
        positions = []
        for t in outs:
            sums.append(t.sum(dtype=_FLOAT32))
            producer[id(t)] = len(sums) - 1
            positions.append(len(sums) - 1)
        skipped = self.tracker is not None and skipped_by(self.tracker.stack, self.skip_patterns)
        self.sums.producers.append(Producer(func.overloadpacket, parents, positions, skipped))
        return out

    def clear(self) -> None:
        """Forget the step's tensors."""
        self.producer.clear()


def _parents(producer: dict[int, int], values: Any) -> list[int]:
    """Positions of the recorded tensors among ``values`` (tensors, or lists and tuples of them)."""
    found = []
    for value in values:
        if isinstance(value, torch.Tensor):
            position = producer.get(id(value))
            if position is not None:
                found.append(position)
        elif isinstance(value, (list, tuple)):
            found += _parents(producer, value)
    return found


# Ops returning uninitialized memory (filled later, e.g. through out=): any bit pattern, NaN included.
UNINITIALIZED_OPS = {
    torch.ops.aten.empty,
    torch.ops.aten.empty_like,
    torch.ops.aten.empty_strided,
    torch.ops.aten.new_empty,
    torch.ops.aten.new_empty_strided,
    torch.ops.aten.empty_permuted,
}

_UNINITIALIZED, _VIEW, _COMPUTES = "uninitialized", "view", "computes"
_FLOAT32 = torch.float32
_KINDS: dict[Any, str] = {}  # aten overload -> its kind, from its schema (looked up once per op)


def _kind(func: Any) -> str:
    """Whether an aten op returns uninitialized memory, only read-only aliases of its inputs (a view), or
    computes (new tensors, or in place)."""
    if func.overloadpacket in UNINITIALIZED_OPS:
        return _UNINITIALIZED
    returns = func._schema.returns
    if returns and all(r.alias_info is not None and not r.alias_info.is_write for r in returns):
        return _VIEW
    return _COMPUTES


@dataclass
class OpFinding:
    """The first op whose finite inputs gave a non-finite output."""

    op: str
    where: str
    module: str | None
    inputs: list[str]
    output: str
    rows: list[int]
    node: str | None = None
    forward_origin: str | None = None

    def format(self, indent: str) -> str:
        lines = [f"{indent}op {self.op}" + (f" in module {self.module}" if self.module else "")]
        if self.node:
            lines.append(
                f"{indent}  during backward, in {self.node}"
                + (f", the gradient of {self.forward_origin}" if self.forward_origin else "")
            )
        else:
            lines.append(f"{indent}  at {self.where}")
        lines += [f"{indent}  input {i}: {s}" for i, s in enumerate(self.inputs)]
        lines.append(f"{indent}  output:  {self.output}")
        return "\n".join(lines)


class FirstNonFiniteOp(TorchDispatchMode):
    """Records the first non-finite-producing op of forward and of backward."""

    def __init__(self, tracker: ModuleTracker, nan_only: bool, skip_patterns: list[str], batch_size: int):
        super().__init__()
        self.tracker = tracker
        self.nan_only = nan_only
        self.skip_patterns = skip_patterns
        self.batch_size = batch_size
        self.forward: OpFinding | None = None
        self.backward: OpFinding | None = None

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        if getattr(func, "overloadpacket", None) in UNINITIALIZED_OPS:
            return out
        node = torch._C._current_autograd_node()
        if (self.backward if node is not None else self.forward) is not None:
            return out
        outputs = [t for t in floating_tensors(out) if has_nonfinite(t, self.nan_only)]
        if not outputs:
            return out
        inputs = floating_tensors((args, kwargs))
        if any(has_nonfinite(t, self.nan_only) for t in inputs) or skipped_by(self.tracker.stack, self.skip_patterns):
            return out
        origin = node.metadata.get(_ORIGIN) if node is not None else None
        finding = OpFinding(
            op=op_name(func),
            where=format_frame(user_frame()),
            module=origin["module"] if origin else self.tracker.current,
            inputs=[stats(t) for t in inputs[:4]],
            output=stats(outputs[0]),
            rows=bad_rows(outputs[0], self.batch_size, self.nan_only),
            node=node.name() if node is not None else None,
            forward_origin=f"{origin['function']} at {origin['where']}" if origin else None,
        )
        if node is None:
            self.forward = finding
        else:
            self.backward = finding
        return out


class TagAutogradNodes(TorchFunctionMode):
    """Tags each autograd node created in forward with its torch function, module and source line."""

    def __init__(self, tracker: ModuleTracker):
        super().__init__()
        self.tracker = tracker

    def __torch_function__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        for t in floating_tensors(out):
            node = t.grad_fn
            if node is not None and _ORIGIN not in node.metadata:
                node.metadata[_ORIGIN] = {
                    "function": getattr(func, "__name__", str(func)),
                    "module": self.tracker.current,
                    "where": format_frame(user_frame()),
                }
        return out


def op_name(func: Any) -> str:
    """``aten.log`` for an aten overload such as ``aten.log.default``."""
    packet = getattr(func, "overloadpacket", None)
    return str(packet) if packet is not None else str(func)
