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

from dataclasses import dataclass

import torch


@dataclass(slots=True)
class Producer:
    """A module call or op: positions of its input and output sums; skipped ones may be non-finite."""

    name: str
    inputs: list[int]
    outputs: list[int]
    skipped: bool = False


class StepSums:
    """The sums of one step and who produced the summed tensors."""

    def __init__(self, nan_only: bool):
        self.nan_only = nan_only
        self.sums: list[torch.Tensor] = []  # float32 sums on the device (OpSums appends its own: no detach needed)
        self.producers: list[Producer] = []
        self._position: dict[int, int] = {}  # id(tensor) -> position of its latest sum

    def add(self, t: torch.Tensor) -> int:
        """Record the sum of a floating tensor (an output: always summed anew); return its position."""
        self.sums.append(t.detach().sum(dtype=torch.float32))
        self._position[id(t)] = len(self.sums) - 1
        return len(self.sums) - 1

    def add_input(self, t: torch.Tensor) -> int:
        """Like ``add``, but reuses the sum of a tensor already recorded as an output in this step."""
        position = self._position.get(id(t))
        return self.add(t) if position is None else position

    def _bad(self, values: torch.Tensor) -> torch.Tensor:
        return torch.isnan(values) if self.nan_only else ~torch.isfinite(values)

    def culprits(self) -> list[str]:
        """Producers with finite inputs and a non-finite output, in order (syncs; call after a failed check)."""
        if not self.sums:
            return []
        bad = self._bad(torch.stack(self.sums)).tolist()
        return [
            p.name
            for p in self.producers
            if not p.skipped and any(bad[i] for i in p.outputs) and not any(bad[i] for i in p.inputs)
        ]

    def clear(self) -> None:
        """Forget the step."""
        self.sums = []
        self.producers = []
        self._position = {}
