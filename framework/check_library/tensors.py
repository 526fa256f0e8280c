"""Describing tensors and source locations in diagnostics: compact, never a wall of numbers."""

from __future__ import annotations

import functools
import os
import sys
import sysconfig
import traceback
import warnings
from collections.abc import Callable, Iterator
from typing import Any

import torch

# Frames in these directories are library code; a diagnosis points at the first frame outside.
_LIBRARY_DIRS = tuple(
    os.path.realpath(d) + os.sep
    for d in (
        os.path.dirname(torch.__file__),
        os.path.dirname(os.path.dirname(os.path.abspath(__file__))),  # the framework package
        sysconfig.get_paths()["stdlib"],
    )
)


def iter_tensors(value: Any) -> Iterator[torch.Tensor]:
    """Tensors inside a module's inputs or outputs (tensors, tuples, lists, dicts, namedtuples)."""
    if isinstance(value, torch.Tensor):
        yield value
    elif isinstance(value, (list, tuple)):
        for item in value:
            yield from iter_tensors(item)
    elif isinstance(value, dict):
        for item in value.values():
            yield from iter_tensors(item)


def map_tensors(value: Any, function: Callable[[torch.Tensor], torch.Tensor]) -> Any:
    """``value`` with ``function`` applied to each tensor inside it (tuples, lists, dicts, namedtuples)."""
    if isinstance(value, torch.Tensor):
        return function(value)
    if isinstance(value, tuple) and hasattr(value, "_fields"):
        return type(value)(*(map_tensors(v, function) for v in value))
    if isinstance(value, (list, tuple)):
        return type(value)(map_tensors(v, function) for v in value)
    if isinstance(value, dict):
        return {k: map_tensors(v, function) for k, v in value.items()}
    return value


def floating_tensors(value: Any) -> list[torch.Tensor]:
    """The floating-point tensors in a (nested) value."""
    return [t for t in iter_tensors(value) if t.is_floating_point()]


def named_tensors(value: Any, prefix: str = "") -> Iterator[tuple[str, torch.Tensor]]:
    """``(path, tensor)`` for the tensors inside a value, in ``iter_tensors``' order: ``logits``, ``hidden_states.1``.

    A Hugging Face ``ModelOutput`` is a dict, so its fields are named as they are (``loss``, ``logits``).
    """
    if isinstance(value, torch.Tensor):
        yield prefix, value
    elif isinstance(value, (list, tuple)):
        for i, item in enumerate(value):
            yield from named_tensors(item, f"{prefix}.{i}" if prefix else str(i))
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from named_tensors(item, f"{prefix}.{key}" if prefix else str(key))


def describe(t: torch.Tensor) -> str:
    """``[64, 512] float32 cpu``."""
    return f"[{', '.join(map(str, t.shape))}] {str(t.dtype).removeprefix('torch.')} {t.device}"


def stats(t: torch.Tensor) -> str:
    """Lovely-tensors summary: shape, range, mean, std and NaN!/+Inf! markers (no values dumped)."""
    if t.device.type == "meta":
        return describe(t)
    from lovely_tensors import lovely

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", RuntimeWarning)  # numpy's overflow inside the histogram: use the fallback
            return str(lovely(t.detach(), color=False))  # lovely returns a str proxy; __repr__ must return a str
    except (IndexError, ValueError, RuntimeWarning):  # its histogram fails on float16 values near the dtype's max
        return f"{lovely(t.detach().float(), color=False)} (as float32; the tensor is {str(t.dtype)[6:]})"


def nonfinite_mask(t: torch.Tensor, nan_only: bool) -> torch.Tensor:
    """Where ``t`` is NaN (``nan_only``) or NaN/Inf."""
    return torch.isnan(t) if nan_only else ~torch.isfinite(t)


def has_nonfinite(t: torch.Tensor, nan_only: bool) -> bool:
    """Whether a floating tensor holds NaN (or Inf unless ``nan_only``); syncs with the device."""
    return t.is_floating_point() and t.numel() > 0 and bool(nonfinite_mask(t, nan_only).any())


def bad_rows(t: torch.Tensor, batch_size: int, nan_only: bool) -> list[int]:
    """Batch rows (axis 0) that hold non-finite values, if axis 0 is the batch axis."""
    if not t.is_floating_point() or t.dim() == 0 or t.shape[0] != batch_size:
        return []
    return torch.nonzero(nonfinite_mask(t, nan_only).reshape(batch_size, -1).any(dim=1)).flatten().tolist()


def is_user_file(filename: str) -> bool:
    """Code of the user (config, model), not of torch, the framework or the standard library."""
    path = os.path.realpath(filename)
    return not path.startswith(_LIBRARY_DIRS) and "site-packages" not in path and "dist-packages" not in path


# Code a library downloaded and runs as its own: Hugging Face's trust_remote_code modules, torch.hub's repositories.
_DOWNLOADED = (os.sep + os.path.join("transformers_modules", ""), os.sep + os.path.join("torch", "hub", ""))


def is_user_class(cls: type) -> bool:
    """A class the user wrote: defined in a user file (not torch's, the framework's or a library's), and not in code a
    library downloaded (a remote-code model of the Hugging Face hub, a torch.hub repository)."""
    filename = getattr(sys.modules.get(cls.__module__), "__file__", None) or ""
    return is_user_file(filename) and not any(part in os.path.realpath(filename) for part in _DOWNLOADED)


@functools.lru_cache(maxsize=4096)
def _is_user_source(filename: str) -> bool:
    return not filename.startswith("<") and is_user_file(filename)


def calling_user_frame() -> traceback.FrameSummary | None:
    """The innermost frame in user code of the current stack, without extracting the whole stack
    (for code that asks on many ops: the source line is read only when formatted)."""
    frame = sys._getframe(1)
    while frame is not None:
        if _is_user_source(frame.f_code.co_filename):
            return traceback.FrameSummary(frame.f_code.co_filename, frame.f_lineno, frame.f_code.co_name)
        frame = frame.f_back
    return None


def user_frame(stack: list[traceback.FrameSummary] | None = None) -> traceback.FrameSummary | None:
    """The innermost frame in user code."""
    stack = traceback.extract_stack() if stack is None else stack
    for frame in reversed(stack):
        if is_user_file(frame.filename) and not frame.filename.startswith("<"):
            return frame
    return None


def format_frame(frame: traceback.FrameSummary | None) -> str:
    """``config.py:23 in forward: return torch.log(x)``."""
    if frame is None:
        return "(no user source line found)"
    return f"{display_path(frame.filename)}:{frame.lineno} in {frame.name}: {(frame.line or '').strip()}"


def display_path(path: str) -> str:
    """``path`` relative to the working directory when it lies inside it (as the user typed it), else as is."""
    if not os.path.isabs(path):
        return path
    relative = os.path.relpath(path)
    return path if relative.startswith("..") else relative


def same_values(target: torch.Tensor, value: torch.Tensor) -> bool:
    """Whether ``target`` is (a view or a cast of) ``value``, a value of the batch: the same memory, or the same
    numbers."""
    if target.untyped_storage().data_ptr() == value.untyped_storage().data_ptr():
        return True
    return target.shape == value.shape and torch.equal(target.to(value.dtype), value)
