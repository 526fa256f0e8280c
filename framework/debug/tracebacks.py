"""Readable tracebacks: better_exchook (values of the variables in each failing statement) with
tensors shown compactly (lovely-tensors: shape, dtype, device, stats), and our exception notes.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator
from typing import Any

import torch

from framework.debug.tensors import stats


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


def install_excepthook() -> None:
    """Use the extended tracebacks for uncaught exceptions (``use_better_exchook``)."""
    sys.excepthook = excepthook


def install_lovely_tensors() -> None:
    """``use_lovely_tensors``: every tensor repr (logs, shells, tracebacks) is a lovely-tensors summary."""
    import lovely_tensors

    lovely_tensors.set_config(color=sys.stdout.isatty())
    lovely_tensors.monkey_patch()
