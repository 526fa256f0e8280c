"""Who froze a parameter while ``get_model`` built the model: a library by design, or a line of the user's.

Libraries freeze parameters that are constants by design: Marian's and Pegasus's sinusoidal position
tables are created as ``nn.Parameter(table, requires_grad=False)``, Whisper's encoder freezes its own
in ``__init__``, and ``model.freeze_encoder()``-style helpers freeze what the user asked for. A parameter
that the user's own code freezes (``requires_grad_(False)``, ``p.requires_grad = False``) may be a
mistake, and the line that did it is worth naming. ``record_freezes`` watches ``get_model``;
``freeze_origin`` answers for a parameter afterwards.
"""

from __future__ import annotations

import contextlib
import os
import sys
import traceback
from collections.abc import Iterator
from dataclasses import dataclass

import torch
from torch.overrides import TorchFunctionMode
from torch.utils.weak import WeakIdKeyDictionary

from framework.check_library.tensors import is_user_file

_TORCH_DIR = os.path.dirname(torch.__file__) + os.sep
_FRAMEWORK_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep
_REQUIRES_GRAD = torch._C.TensorBase.__dict__["requires_grad"]  # its __set__ is what ``p.requires_grad = x`` calls


@dataclass(frozen=True)
class FreezeOrigin:
    """Where a parameter was frozen (or created frozen) during ``get_model``."""

    frame: traceback.FrameSummary | None  # the innermost frame outside torch and the framework
    by_library: bool  # that frame is a library's (site-packages), not the user's code
    created_frozen: bool  # ``nn.Parameter(..., requires_grad=False)``: a constant by construction

    @property
    def by_design(self) -> bool:
        """A library's decision, or a parameter written as a constant: not a mistake to report."""
        return self.by_library or self.created_frozen


_origins = WeakIdKeyDictionary()  # parameter -> FreezeOrigin, by identity (tensors compare elementwise)


def freeze_origin(param: torch.Tensor) -> FreezeOrigin | None:
    """Where ``param`` was frozen while ``get_model`` ran; None when that was not seen (frozen elsewhere)."""
    return _origins.get(param)


def _origin(created_frozen: bool) -> FreezeOrigin:
    frame = sys._getframe(2)
    while frame is not None and frame.f_code.co_filename.startswith((_TORCH_DIR, _FRAMEWORK_DIR)):
        frame = frame.f_back
    if frame is None:
        return FreezeOrigin(None, False, created_frozen)
    summary = traceback.FrameSummary(frame.f_code.co_filename, frame.f_lineno, frame.f_code.co_name)
    return FreezeOrigin(summary, not is_user_file(summary.filename), created_frozen)


class _FreezeWatch(TorchFunctionMode):
    """Sees ``requires_grad_(False)`` and ``.requires_grad = False`` on parameters."""

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        result = func(*args, **kwargs)
        setter = getattr(func, "__self__", None) is _REQUIRES_GRAD
        if setter or func is torch.Tensor.requires_grad_:
            wanted = kwargs.get("requires_grad", args[1] if len(args) > 1 else True)
            if isinstance(args[0], torch.nn.Parameter) and not wanted:
                _origins[args[0]] = _origin(created_frozen=False)
        return result


@contextlib.contextmanager
def record_freezes() -> Iterator[None]:
    """Record, while the block runs, where parameters are frozen or created frozen (``freeze_origin``)."""
    original = torch.nn.Parameter.__dict__["__new__"]  # a staticmethod: restored as it was

    def new(cls, data=None, requires_grad=True):
        param = original.__func__(cls, data, requires_grad)
        if not requires_grad:
            _origins[param] = _origin(created_frozen=True)
        return param

    torch.nn.Parameter.__new__ = staticmethod(new)
    try:
        with _FreezeWatch():
            yield
    finally:
        torch.nn.Parameter.__new__ = original
