"""Cheap device-side NaN/Inf detection for a whole step: one float32 sum per checked tensor.

A tensor holding NaN or Inf has a non-finite sum, and a sum is one fast vectorized pass (CPU
boolean reductions such as ``isfinite(x).any()`` are 20x slower, and ``torch._foreach_norm`` is
slower than a sum for anything but the 2-norm, whose squares overflow already at 1.8e19). The
sums stay on the device; the numerics guard checks them with the losses in one stacked tensor,
with one sync per step. Only when that fails are the individual sums read and the recorded
producers (modules or ops) checked for "finite inputs, non-finite output". A false alarm (a
finite tensor whose sum overflows float32) is possible in principle; the replay that follows a
detection uses exact checks and says so.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

_FLOAT32 = torch.float32


@dataclass(slots=True)
class Producer:
    """A module call or op: positions of its input and output sums; skipped ones may be non-finite."""

    name: Any  # a module path, or what the recorder's ``StepSums.describe`` names
    inputs: list[int]
    outputs: list[int]
    skipped: bool = False


class StepSums:
    """The sums of one step and who produced the summed tensors."""

    def __init__(self, nan_only: bool):
        self.nan_only = nan_only
        self.sums: list[torch.Tensor] = []  # float32 sums on the device (OpSums appends its own)
        self.producers: list[Producer] = []
        # (name, position) of sums whose inputs are not traced, in the order they were taken: the first flagged one
        # had nothing flagged before it, so its inputs were finite (OpSums without skip patterns, and gradients)
        self.untraced: list[tuple[Any, int]] = []
        # id(tensor) -> position of its latest sum, its version then, and the tensor (weakly: a step's outputs go)
        self._position: dict[int, tuple[int, int | None, weakref.ref]] = {}
        self.describe: Callable[[Any], str] = str  # a producer's name as the culprits give it (OpSums sets its own)
        # Tensors from outside the step (the batch): as module inputs they are summed only when culprits are asked
        # for (a NaN there that matters reaches an output); at negative positions, -1 the first.
        self._outside: dict[int, torch.Tensor] = {}
        self._deferred: list[tuple[torch.Tensor, int | None]] = []  # (tensor, its version when it was an input)

    def add(self, t: torch.Tensor) -> int:
        """Record the sum of a floating tensor (a module's output); return its position. The same tensor recorded
        before and not changed in place since (a container's output is its last child's) keeps its sum."""
        version = _version(t)
        known = self._position.get(id(t))
        if known is not None and version is not None and known[1] == version and known[2]() is t:
            return known[0]
        sums = self.sums
        sums.append(t.detach().sum(dtype=_FLOAT32))
        self._position[id(t)] = (len(sums) - 1, version, weakref.ref(t))  # the id of a freed one is reused
        return len(sums) - 1

    def add_input(self, t: torch.Tensor) -> int:
        """Like ``add``, for a module's input (usually the output of the module before, summed already); a tensor
        from outside the step (``outside``) is summed only if culprits are asked for."""
        if self._outside.get(id(t)) is not t:
            return self.add(t)
        known = self._position.get(id(t))
        if known is None:
            self._deferred.append((t, _version(t)))
            known = self._position[id(t)] = (-len(self._deferred), None, weakref.ref(t))
        return known[0]

    def outside(self, tensors: Any) -> None:
        """The step's tensors from outside the model (the batch), alive throughout the step."""
        self._outside = {id(t): t for t in tensors if isinstance(t, torch.Tensor) and t.is_floating_point()}

    def _bad(self, values: torch.Tensor) -> torch.Tensor:
        return torch.isnan(values) if self.nan_only else ~torch.isfinite(values)

    def culprits(self) -> list[str]:
        """Producers with finite inputs and a non-finite output, in order (syncs; call after a failed check)."""
        if not self.sums:
            return []
        bad = self._bad(torch.stack(self.sums)).tolist()
        # a deferred input changed in place since it was one cannot be judged: counted finite (the replay is exact)
        deferred = [
            _version(t) == version and bool(self._bad(t.detach().sum(dtype=_FLOAT32))) for t, version in self._deferred
        ]
        bad += deferred[::-1]  # position -1 is the first
        found = [
            self.describe(p.name)
            for p in self.producers
            if not p.skipped and any(bad[i] for i in p.outputs) and not any(bad[i] for i in p.inputs)
        ]
        first = next((name for name, i in self.untraced if bad[i]), None)
        return found if first is None else [*found, self.describe(first)]

    def any_nan(self) -> bool:
        """Whether a recorded sum is NaN (syncs): a float32 sum of finite values overflows to +-Inf, not NaN, unless
        values of both signs overflow it."""
        return bool(self.sums) and bool(torch.isnan(torch.stack(self.sums)).any())

    def clear(self) -> None:
        """Forget the step."""
        self.sums = []
        self.producers = []
        self.untraced = []
        self._position = {}
        self._outside = {}
        self._deferred = []


def _version(t: torch.Tensor) -> int | None:
    """The tensor's version counter (bumped by every in-place change); None for an inference tensor (none kept)."""
    try:
        return t._version
    except RuntimeError:
        return None
