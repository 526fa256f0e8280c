"""Finding randomness that belongs to training only (dropout masks, noise injection) in a forward pass.

A dispatch mode follows every random draw (``bernoulli``, ``rand``, ``randn``, ``normal_`` ...)
through the ops that use it. A draw is train-only randomness when it reaches the model's
activations (tensors that require gradients) as

- a multiplicative mask: a ``bernoulli`` draw or a thresholded uniform draw (``rand(...) > p``,
  ``floor(keep + rand(...))``) multiplied into an activation: dropout, drop-path;
- additive noise of a fixed scale: a draw scaled by constants only and added to an activation
  (``h + 0.1 * torch.randn_like(h)``).

Draws of integers (``multinomial``, ``randint``, ``randperm``) are choices, not noise: a policy's sampled actions,
negative samples, an order; what derives from them (a reward) is not followed. A draw scaled by a tensor that
requires gradients is the model's own stochastic prediction (a
VAE's ``mean + std * eps``) and is not followed further; draws that never meet an activation
(random masking of token ids, a diffusion model's noise on the data) are how such models are
evaluated and are not reported. The forward must run with gradients enabled: they are what tells
activations from data.
"""

from __future__ import annotations

import traceback
from dataclasses import dataclass
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from framework.check_library.module_tracker import ModuleTracker
from framework.check_library.tensors import calling_user_frame

_MASK_MAKERS = {"gt", "lt", "ge", "le", "floor", "floor_", "bernoulli", "bernoulli_"}
_MULTIPLY = {"mul", "mul_", "where", "masked_fill", "masked_fill_"}
_ADD = {"add", "add_", "sub", "sub_"}


@dataclass
class RandomDraw:
    """Where a random op ran: the op, the innermost module and the user's source line."""

    op: str
    module: str | None
    frame: traceback.FrameSummary | None


@dataclass
class TrainOnlyRandomness:
    """A draw that reached an activation as a mask (dropout) or as additive noise."""

    kind: str  # "mask" or "noise"
    draw: RandomDraw
    applied_by: str  # the op that combined it with the activation


class _Derived:
    """What a tensor derived from a draw carries: the draw, and whether it has become a mask."""

    def __init__(self, draw: RandomDraw, mask: bool):
        self.draw = draw
        self.mask = mask


class RandomnessWatch(TorchDispatchMode):
    """Records the train-only randomness of the ops run inside it (``found``, in the order they happened)."""

    def __init__(self, tracker: ModuleTracker):
        super().__init__()
        self.tracker = tracker
        self.found: list[TrainOnlyRandomness] = []
        self._derived: dict[int, _Derived] = {}
        self._alive: list[torch.Tensor] = []  # keeps followed tensors alive: their ids must not be reused

    def __torch_dispatch__(self, func: Any, types: Any, args: tuple = (), kwargs: dict | None = None) -> Any:
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        drawn = torch.Tag.nondeterministic_seeded in func.tags
        if not drawn and not self._derived:  # the common case, kept cheap: nothing random so far
            return out
        name = func.overloadpacket.__name__
        tensors = [a for a in (*args, *kwargs.values()) if isinstance(a, torch.Tensor)]
        derived = [self._derived[id(t)] for t in tensors if id(t) in self._derived]
        if drawn and isinstance(out, torch.Tensor):
            if not derived and not (out.is_floating_point() or out.is_complex()):
                return out  # a choice (multinomial, randint, randperm: actions, negatives, an order), not noise
            frame = calling_user_frame()
            draw = derived[0].draw if derived else RandomDraw(name, self.tracker.current, frame)
            self._follow(out, _Derived(draw, mask=name.startswith("bernoulli")))
            return out
        if not derived or not isinstance(out, torch.Tensor):
            return out
        source = derived[0]
        activation = any(t.requires_grad and id(t) not in self._derived for t in tensors)
        if not activation:  # still a function of the draw and of constants: follow it further
            self._follow(out, _Derived(source.draw, source.mask or name in _MASK_MAKERS))
        elif source.mask and name in _MULTIPLY:
            self.found.append(TrainOnlyRandomness("mask", source.draw, name))
        elif not source.mask and name in _ADD:
            self.found.append(TrainOnlyRandomness("noise", source.draw, name))
        return out

    def _follow(self, tensor: torch.Tensor, derived: _Derived) -> None:
        self._derived[id(tensor)] = derived
        self._alive.append(tensor)
