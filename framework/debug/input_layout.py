"""Is the data's layout what the model reads? (``debug_input_layout``, on by default.)

``extern_data`` declares the axes of each key: an image batch as ``(H, W, 3)`` (channels last), a
sequence of features as ``(None, F)``. A model that wants another layout (a Conv2d: channels
first; a Conv1d: features first) needs the axes moved with ``permute``. Written as ``.view`` or
``.reshape`` to the wanted shape, the code runs and the model learns from scrambled inputs: a
view never moves an axis, it cuts the same memory anew.

In the probe session's run of the first batch, a torch function mode follows each dense batch key
through the ops that keep its shape (casts, scaling, normalisation) and names a ``view`` or
``reshape`` that turns it into the same sizes in another order, with its line and the
``permute`` that was meant.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import torch
from torch.overrides import TorchFunctionMode

from framework.base.config import Config
from framework.base.errors import ModelCheckError
from framework.base.findings import Finding
from framework.base.options import register
from framework.check_library.tensors import format_frame, user_frame
from framework.core.run_ctx import RunCtx
from framework.core.state import RunState
from framework.debug.first_step import SharedRunCheck
from framework.debug.sanity import report_findings

CHECK = "input-layout check"

register(
    "debug_input_layout",
    "bool",
    True,
    "First step: a batch key reshaped with .view/.reshape into its own sizes in another order (a permute was meant).",
    __name__,
)

_RESHAPES = {"view", "reshape"}


def moved_axes(before: tuple[int, ...], after: tuple[int, ...]) -> list[int] | None:
    """The permutation of ``before``'s axes that gives ``after``'s sizes, if ``after`` has the same sizes (those
    above 1) in another order; None for a real reshape (sizes merged or split) or the same order."""
    kept = [n for n in before if n != 1]
    new = [n for n in after if n != 1]
    if kept == new or sorted(kept) != sorted(new) or len(before) != len(after):
        return None
    free = list(range(len(before)))
    order = []
    for n in after:
        index = next(i for i in free if before[i] == n)
        free.remove(index)
        order.append(index)
    return order


class _LayoutWatch(TorchFunctionMode):
    """Follows the dense batch keys through shape-keeping ops; records reshapes that reorder their sizes."""

    def __init__(self, batch: dict[str, torch.Tensor], declared: dict[str, tuple]):
        super().__init__()
        self.declared = declared
        self.origin: dict[int, str] = {}  # id of a followed tensor -> its batch key
        self._alive: list[torch.Tensor] = []  # followed tensors stay alive: their ids must not be reused
        for key in declared:
            self._follow(batch[key], key)
        self.findings: list[Finding] = []

    def _follow(self, tensor: torch.Tensor, key: str) -> None:
        self.origin[id(tensor)] = key
        self._alive.append(tensor)

    def __torch_function__(self, func: Any, types: Any, args: tuple = (), kwargs: dict | None = None) -> Any:
        out = func(*args, **(kwargs or {}))
        source = next((a for a in args if isinstance(a, torch.Tensor) and id(a) in self.origin), None)
        if source is None or not isinstance(out, torch.Tensor):
            return out
        key = self.origin[id(source)]
        if getattr(func, "__name__", "") in _RESHAPES:
            order = moved_axes(tuple(source.shape), tuple(out.shape))
            if order is not None and not self.findings:
                self.findings.append(self._finding(key, func.__name__, source, out, order))
        elif out.shape == source.shape:
            self._follow(out, key)
        return out

    def _finding(self, key: str, how: str, source: torch.Tensor, out: torch.Tensor, order: list[int]) -> Finding:
        before, after = list(source.shape), list(out.shape)
        return Finding(
            "warning",
            "sanity check",
            f"batch key {key!r} (declared shape {self.declared[key]}, here {before}) is turned into {after} by "
            f".{how} at {format_frame(user_frame())}: the same sizes in another order. A view or reshape does not "
            f"move axes, it cuts the memory anew, so every position of the new axes mixes pieces of the old ones "
            f"(an image stored height x width x channels read as channels x height x width scrambles every pixel) "
            f"and the model learns from scrambled inputs without an error. Move the axes with "
            f".permute({', '.join(map(str, order))}) instead. (debug_input_layout = False turns this check off.)",
            evidence={"declared_shape": self.declared[key], "shape": before, "turned_into": after},
            where={"key": key, "op": how, "line": format_frame(user_frame())},
            fix=f"Move the axes with .permute({', '.join(map(str, order))}) instead of .{how}.",
            option="debug_input_layout = False",
        )


class InputLayoutCheck(SharedRunCheck):
    """Watches the probe session's run of the first batch for reshapes that reorder a batch key's axes."""

    bug_check = ("debug_input_layout",)

    check = CHECK

    @classmethod
    def from_config(cls, config: Config, state: RunState) -> InputLayoutCheck | None:
        return cls() if config.bool("debug_input_layout") else None

    @staticmethod
    def _declared(state: RunState) -> dict[str, tuple]:
        """The dense batch keys of two or more declared axes, with their declared shapes."""
        return {
            name: key.shape
            for name, key in state.extern_data.items()
            if key.sparse_dim is None and len(key.shape) >= 2 and name in state.batch
        }

    def applies(self, state: RunState) -> bool:
        return bool(self._declared(state))

    @contextlib.contextmanager
    def observe(self, state: RunState, model: torch.nn.Module) -> Iterator[_LayoutWatch]:
        with _LayoutWatch(state.batch, self._declared(state)) as watch:
            yield watch

    def conclude(self, state: RunState, watch: _LayoutWatch, run_ctx: RunCtx | None) -> None:
        report_findings(state, "first step", watch.findings, ModelCheckError, False, off="debug_input_layout = False")


PLUGINS = (InputLayoutCheck,)
