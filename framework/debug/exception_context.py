"""Context for an exception raised inside the model: which module, with what inputs, at which step.

Costs nothing until an exception happens: the module call path is read off the traceback's
frames (a frame whose ``self`` is one of the model's modules), not tracked by hooks. The text is
attached with ``add_note``, so the exception keeps its type and traceback and ``ipython --pdb``
still lands in the frame that raised it.
"""

from __future__ import annotations

import re
import types
from typing import Any

import torch
from torch import nn

from framework.base.errors import FrameworkError
from framework.check_library.tensors import describe
from framework.check_library.tracebacks import debugger_hint
from framework.core.events import Event
from framework.core.plugin import TASKS, Plugin, on
from framework.core.state import RunState

_MODULE_MACHINERY = nn.modules.module.__file__  # _call_impl and friends, whose locals hold the module too


def _describe_value(value: Any) -> str:
    if isinstance(value, torch.Tensor):
        return describe(value)
    if isinstance(value, (list, tuple)) and value and all(isinstance(v, torch.Tensor) for v in value):
        return "(" + ", ".join(describe(v) for v in value) + ")"
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def module_frames(tb: types.TracebackType | None, model: nn.Module) -> list[tuple[str, nn.Module, types.FrameType]]:
    """(path, module, frame) of the model's module methods on the traceback, outermost first.

    The step may have run on a copy of the model (a first-step check's run, ``probe.model_copy``):
    then the copy's modules are named.
    """
    names = {id(m): name or "(model)" for name, m in _model_on_traceback(tb, model).named_modules()}
    found: list[tuple[str, nn.Module, types.FrameType]] = []
    while tb is not None:
        frame = tb.tb_frame
        owner = frame.f_locals.get("self")
        if isinstance(owner, nn.Module) and id(owner) in names and frame.f_code.co_filename != _MODULE_MACHINERY:
            found.append((names[id(owner)], owner, frame))
        tb = tb.tb_next
    return found


def _model_on_traceback(tb: types.TracebackType | None, model: nn.Module) -> nn.Module:
    """``model``, or the copy of it that the traceback's frames ran (a copy shares the model's parameters)."""
    first = next(model.parameters(), None)
    while tb is not None:
        for name in ("self", "model"):
            value = tb.tb_frame.f_locals.get(name)
            if value is model:
                return model
            if type(value) is type(model) and first is not None and next(value.parameters(), None) is first:
                return value
        tb = tb.tb_next
    return model


def describe_context(state: RunState, exc: BaseException) -> str:
    """The note added to an exception raised during a run."""
    if state.stage is None:
        where = (
            f"[framework] raised outside a step ({state.task}) at epoch {state.epoch}, global step {state.global_step}"
        )
    else:
        source = "" if state.stage == "train" else f" on dataset {state.dataset!r}"
        where = f"[framework] raised during {state.stage} step{source} at epoch {state.epoch}, global step {state.global_step}"
    lines = [where]
    if state.stage is not None and state.batch_indices is not None:
        indices = state.batch_indices
        shown = ", ".join(str(int(i)) for i in indices[:8])
        lines[0] += f" (batch of {len(indices)} sequences: {shown}{', ...' if len(indices) > 8 else ''})"
    if state.model is not None:
        frames = module_frames(exc.__traceback__, state.model)
        if frames:
            path, module, frame = frames[-1]
            lines.append(f"  module call path: {' -> '.join(p for p, _, _ in frames)} ({type(module).__name__})")
            code = frame.f_code
            arg_names = code.co_varnames[: code.co_argcount + code.co_kwonlyargcount]
            args = [  # arguments left at None (a Hugging Face forward has a dozen) say nothing
                f"{n}={_describe_value(frame.f_locals[n])}"
                for n in arg_names
                if n != "self" and frame.f_locals.get(n) is not None
            ]
            lines.append(f"  inputs of {path}.{code.co_name}: {', '.join(args) or '(none)'}")
            params = [f"{n}={describe(p)}" for n, p in module.named_parameters(recurse=False)]
            params += [f"{n}={describe(b)}" for n, b in module.named_buffers(recurse=False)]
            if params:
                lines.append(f"  parameters of {path}: {', '.join(params)}")
    if state.stage is not None and state.batch:
        lines.append("  batch: " + ", ".join(f"{k}={describe(v)}" for k, v in state.batch.items()))
    return "\n".join(lines)


# Torch errors whose cause in this framework is known: the hint says it in the framework's terms.
_HINTS = {
    "backward through the graph a second time": (
        "[framework] The engine calls backward() on the losses marked with run_ctx.mark_as_loss after train_step "
        "returns; a train_step that calls loss.backward() itself makes this a second backward through the same "
        "graph. Remove the backward() (and optimizer.step() / zero_grad()) from train_step."
    ),
}

# RETURNN's Tensor API used on a batch here, whose values are plain torch tensors (a RETURNN config run unedited).
_RETURNN_TENSOR_API = re.compile(
    r"'Tensor' object has no attribute '(raw_tensor|dims|dims_set|dim_tags|feature_dim|batch_dim|sparse_dim|"
    r"placeholder|get_time_dim_tag|get_sequence_lengths|copy_template)'"
)
_RETURNN_HINT = (
    "[framework] .{attribute} is RETURNN's Tensor API; a batch here holds plain torch tensors: extern_data['data'] "
    "is the tensor (RETURNN's .raw_tensor) and extern_data['data:seq_len'] its lengths (RETURNN's "
    "dims[1].dyn_size_ext.raw_tensor). docs/from_returnn.rst shows the lines of a RETURNN config to change."
)


class ExceptionContext(Plugin):
    """Attaches the context note to an exception from user code, in every task."""

    tasks = TASKS

    @on(Event.EXCEPTION)
    def add_note(self, state: RunState) -> None:
        exc = state.exception
        if exc is None or isinstance(exc, FrameworkError):
            return
        exc.add_note(describe_context(state, exc))
        debugger = debugger_hint(exc.__traceback__)  # the frames below the engine's are all there now
        if debugger:
            exc.add_note(debugger)
        for text, hint in _HINTS.items():
            if text in str(exc):
                exc.add_note(hint)
        returnn_api = _RETURNN_TENSOR_API.search(str(exc)) if isinstance(exc, AttributeError) else None
        if returnn_api:
            exc.add_note(_RETURNN_HINT.format(attribute=returnn_api.group(1)))


PLUGINS = (ExceptionContext,)
