"""Op-level numerics checks: torch functions and autograd nodes in the fast path, every aten op in the exact one.

``OpSums`` is the fast path of ``debug_add_check_numerics_ops``: the floating outputs of every torch function
called in forward, and the gradients every autograd node computes in backward, are reduced to a sum on the device,
without a host sync (see ``step_sums``); the step checks them once. ``FirstNonFiniteOp`` is the slow, exact path
used when replaying a failing step: it stops at nothing but records the first aten op whose inputs were finite and
whose output is not, with the user's source line; in backward it also names the autograd node and, through the tags
that ``TagAutogradNodes`` put on the nodes during forward, the forward op, module and line that the node
differentiates.
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass
from typing import Any

import torch
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode

from framework.check_library.module_tracker import ModuleTracker, skipped_by
from framework.check_library.step_sums import Producer, StepSums
from framework.check_library.tensors import bad_rows, floating_tensors, format_frame, has_nonfinite, stats, user_frame

_ORIGIN = "framework_origin"  # key of our tag in an autograd node's metadata
_FLOAT32 = torch.float32
_TENSOR = torch.Tensor
_SETITEM = torch.Tensor.__setitem__


class OpSums(TorchFunctionMode):
    """Fast path of ``debug_add_check_numerics_ops``: a sum per torch function output and per computed gradient.

    A torch function mode, not a dispatch mode: a Python dispatch mode costs every aten op (views, the ops inside
    ``F.linear`` or ``nn.LSTM``, every op of every backward formula) a trip through Python, about 6 us each, which
    alone made the check 1.25-1.35x a step. Here forward costs one trip per torch function the model calls
    (``F.linear``, ``torch.log``, ``Tensor.masked_fill_``), and backward one hook call per autograd node those
    functions created; an aten op inside a function or a backward formula is checked through the function's output
    or the node's gradients. What happens inside one function and is gone at its end is seen only by the exact
    replay (``FirstNonFiniteOp``), which a flagged step runs to name the aten op and its source line.

    Each output is summed when its function returns, so an in-place function that cleans it later does not hide
    it (an in-place function's own output is its mutated input, summed anew). Without skip patterns the first
    flagged sum names the culprit (everything before it was finite). With them, each function's inputs are
    traced to the sums of the functions that produced them, so that infinities passed on from a skipped module
    blame no one; tensors from outside the step (parameters, the batch) count as finite (the replay checks them
    exactly), and gradients are not traced (backward runs outside modules: nothing in it is skipped).
    """

    def __init__(self, sums: StepSums, skip_patterns: list[str], tracker: ModuleTracker | None):
        super().__init__()
        self.sums = sums
        self.skip_patterns = skip_patterns
        self.tracker = tracker  # with skip patterns only: then inputs are traced
        # id(tensor) -> position of its sum and the tensor, weakly (the id of a freed one is reused); traced only
        self.producer: dict[int, tuple[int, weakref.ref]] = {}
        self.hooked: dict[int, Any] = {}  # id(node) -> the autograd node, kept alive so that its id stays its own
        sums.describe = function_name

    def __torch_function__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        if isinstance(out, _TENSOR):
            if not out.is_floating_point() or func in _UNINITIALIZED_FUNCTIONS:
                return out
            outs = (out,)
        elif func is _SETITEM:
            outs = [args[0]] if args[0].is_floating_point() else ()
        elif isinstance(out, (tuple, list)):
            outs = floating_tensors(out)
        else:
            return out
        sums, tracker = self.sums.sums, self.tracker
        if tracker is not None:  # before the outputs are recorded: an in-place function's output is its input
            parents = _parents(self.producer, args)
            if kwargs:
                parents += _parents(self.producer, kwargs.values())
        positions = []
        for t in outs:
            if t.requires_grad:
                sums.append(t.detach().sum(dtype=_FLOAT32))
                node = t.grad_fn
                if node is not None and id(node) not in self.hooked:
                    self.hooked[id(node)] = node
                    node.register_hook(self._gradient_sums(func))
            else:
                sums.append(t.sum(dtype=_FLOAT32))
            if tracker is None:
                self.sums.untraced.append((func, len(sums) - 1))
            else:
                self.producer[id(t)] = (len(sums) - 1, weakref.ref(t))
                positions.append(len(sums) - 1)
        if tracker is not None:
            skipped = skipped_by(tracker.stack, self.skip_patterns)
            self.sums.producers.append(Producer(func, parents, positions, skipped))
        return out

    def _gradient_sums(self, func: Any):
        """A post hook for the autograd node that ``func`` created: sums the gradients it computes."""
        sums, untraced, name = self.sums.sums, self.sums.untraced, ("backward of", func)

        def hook(grad_inputs: tuple, grad_outputs: tuple) -> None:
            for g in grad_inputs:
                if g is not None and g.is_floating_point():
                    sums.append(g.sum(dtype=_FLOAT32))
                    untraced.append((name, len(sums) - 1))

        return hook

    def clear(self) -> None:
        """Forget the step's tensors and autograd nodes."""
        self.producer.clear()
        self.hooked.clear()


def function_name(func: Any) -> str:
    """``torch.log``, ``Tensor.masked_fill_``, ``torch.nn.functional.linear`` for a torch function; a name
    (a module path) as it is."""
    if isinstance(func, str):
        return func
    if isinstance(func, tuple):  # ("backward of", function)
        return f"{func[0]} {function_name(func[1])}"
    owner = getattr(func, "__self__", None)
    if getattr(func, "__name__", None) == "__get__" and hasattr(owner, "__objclass__"):  # a property: Tensor.T
        return f"Tensor.{owner.__name__}"
    qualname = getattr(func, "__qualname__", None) or getattr(func, "__name__", None) or str(func)
    for prefix, shown in (("TensorBase.", "Tensor."), ("_VariableFunctionsClass.", "torch.")):
        if qualname.startswith(prefix):
            return shown + qualname.removeprefix(prefix)
    module = getattr(func, "__module__", None)
    if module == "torch._C._nn":
        module = "torch.nn.functional"
    return f"{module}.{qualname}" if module and not qualname.startswith("Tensor.") else qualname


def _parents(producer: dict[int, tuple[int, weakref.ref]], values: Any) -> list[int]:
    """Positions of the recorded tensors among ``values`` (tensors, or lists and tuples of them)."""
    found = []
    for value in values:
        if isinstance(value, torch.Tensor):
            known = producer.get(id(value))
            if known is not None and known[1]() is value:
                found.append(known[0])
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
# The same as torch functions (checked by OpSums).
_UNINITIALIZED_FUNCTIONS = {
    torch.empty,
    torch.empty_like,
    torch.empty_strided,
    torch.Tensor.new_empty,
    torch.Tensor.new_empty_strided,
}


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
