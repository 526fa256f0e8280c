"""Readable tracebacks.

By default (``compact_excepthook``): the user's own frames with the values of the variables in
their failing line, library frames (torch, the framework, the standard library) folded into one
line per run of them, the error, then the framework's note (module path, shapes, batch). Tensors
are one-line summaries (lovely-tensors: shape, stats) and modules their class and path, so the
model's repr never fills the screen. ``use_better_exchook = True`` prints better_exchook's full
dump instead: every frame, with its variables.
"""

from __future__ import annotations

import contextlib
import keyword
import os
import re
import sys
import traceback
import types
from collections.abc import Iterator
from typing import Any

import torch

from framework.inspection.tensors import display_path, is_user_file, stats

_VALUE_WIDTH = 160
_RNN_PY = os.path.realpath(os.path.join(os.path.dirname(__file__), "..", "..", "rnn.py"))


@contextlib.contextmanager
def compact_tensor_reprs() -> Iterator[None]:
    """Within the block, ``repr(tensor)`` is a one-line summary instead of its values."""
    original = torch.Tensor.__repr__
    torch.Tensor.__repr__ = lambda self, *args, **kwargs: stats(self)  # type: ignore[method-assign]
    try:
        yield
    finally:
        torch.Tensor.__repr__ = original  # type: ignore[method-assign]


def excepthook(etype: type[BaseException], value: BaseException, tb: Any) -> None:
    """``sys.excepthook``: better_exchook's extended traceback, compact tensors, then the notes."""
    import better_exchook

    with compact_tensor_reprs():
        better_exchook.better_exchook(
            etype, value, tb, autodebugshell=False, file=sys.stderr, with_color=sys.stderr.isatty()
        )
    for note in getattr(value, "__notes__", ()):
        print(note, file=sys.stderr)


def install_excepthook(full: bool = False) -> None:
    """Print uncaught exceptions compactly, or with better_exchook's full dump (``use_better_exchook``)."""
    sys.excepthook = excepthook if full else compact_excepthook


def compact_excepthook(etype: type[BaseException], value: BaseException, tb: Any) -> None:
    """``sys.excepthook``: the compact traceback (see the module doc) on stderr."""
    print(format_compact(value), file=sys.stderr, end="")


def format_compact(exc: BaseException) -> str:
    """The compact traceback of ``exc``, with the exceptions it was chained from first (as Python does)."""
    parts = []
    if exc.__cause__ is not None:
        parts += [format_compact(exc.__cause__), "\nThe above exception was the direct cause of the following:\n\n"]
    elif exc.__context__ is not None and not exc.__suppress_context__:
        parts += [format_compact(exc.__context__), "\nDuring handling of the above exception, another occurred:\n\n"]
    lines = ["Traceback (most recent call last; library frames folded):"]
    folded: list[traceback.FrameSummary] = []
    tb = exc.__traceback__
    while tb is not None:
        summary = traceback.FrameSummary(tb.tb_frame.f_code.co_filename, tb.tb_lineno, tb.tb_frame.f_code.co_name)
        if _is_user_frame(summary.filename):
            lines += _fold(folded) + _user_frame(summary, tb.tb_frame)
            folded = []
        else:
            folded.append(summary)
        tb = tb.tb_next
    lines += _fold(folded)
    name = type(exc).__qualname__
    module = type(exc).__module__
    name = name if module in ("builtins", "__main__") else f"{module}.{name}"
    lines.append(f"{name}: {exc}" if str(exc) else name)
    lines += [str(note) for note in getattr(exc, "__notes__", ())]
    return "".join(parts) + "\n".join(line.rstrip("\n") for line in lines) + "\n"


def _is_user_frame(filename: str) -> bool:
    own_script = os.path.realpath(filename) == _RNN_PY
    return is_user_file(filename) and not filename.startswith("<") and not own_script


def _fold(frames: list[traceback.FrameSummary]) -> list[str]:
    if not frames:
        return []
    where = [f"{_short(f.filename)}:{f.lineno} {f.name}" for f in (frames[0], frames[-1])]
    return [f"  ... {len(frames)} library frame(s): {where[0]}" + (f" ... {where[1]}" if len(frames) > 1 else "")]


def _short(filename: str) -> str:
    """``torch/nn/modules/linear.py`` for a file inside an installed package or the standard library."""
    parts = filename.replace(os.sep, "/").split("/")
    for anchor in ("site-packages", "dist-packages", "framework", "lib"):
        if anchor in parts:
            index = len(parts) - 1 - parts[::-1].index(anchor)
            return "/".join(parts[index + (anchor != "framework") :])
    return display_path(filename)


def _user_frame(summary: traceback.FrameSummary, frame: types.FrameType) -> list[str]:
    lines = [f'  File "{summary.filename}", line {summary.lineno}, in {summary.name}']
    source = (summary.line or "").strip()
    if source:
        lines.append(f"    {source}")
    for name in _names_in(source):
        if name in frame.f_locals:
            lines.append(f"      {name} = {_value(frame.f_locals[name])}")
    return lines


def _names_in(source: str) -> list[str]:
    """The identifiers of a line (also inside f-strings), in order, each once; attribute names left out."""
    names = []
    for name in re.findall(r"(?<![.\w])[A-Za-z_]\w*", source):
        if not keyword.iskeyword(name) and name not in names:
            names.append(name)
    return names


def _value(value: Any) -> str:
    if isinstance(value, torch.Tensor):
        return stats(value)
    if isinstance(value, torch.nn.Module):
        return f"<{type(value).__name__} module>"
    if isinstance(value, (types.ModuleType, types.FunctionType, types.BuiltinFunctionType, type)):
        return f"<{type(value).__name__} {getattr(value, '__name__', '')}>"
    with compact_tensor_reprs():
        try:
            text = repr(value)
        except Exception as exc:  # a broken __repr__ must not hide the real error
            text = f"<repr failed: {type(exc).__name__}>"
    text = " ".join(text.split())
    return text if len(text) <= _VALUE_WIDTH else text[: _VALUE_WIDTH - 3] + "..."


def install_lovely_tensors() -> None:
    """``use_lovely_tensors``: every tensor repr (logs, shells, tracebacks) is a lovely-tensors summary."""
    import lovely_tensors

    lovely_tensors.set_config(color=sys.stdout.isatty())
    lovely_tensors.monkey_patch()
