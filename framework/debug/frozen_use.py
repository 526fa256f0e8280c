"""Which frozen parameters the first step uses (``FROZEN_USED``), for the sanity check's judgement of them.

A frozen parameter of a module the step never runs (EMA weights kept for evaluation) is no mistake: it would get no
gradient either way. Forward hooks see which modules run, but not a parameter that the step uses without calling its
module (a cosine head's ``F.normalize(self.fc.weight)``, a ``ParameterList``). This plugin watches the first-step
checks' shared run of the first batch, in training mode as the real step, and records every frozen parameter whose
values enter the gradient's computation there.
"""

from __future__ import annotations

import contextlib
import weakref
from collections.abc import Iterator

import torch
from torch import nn
from torch.overrides import TorchFunctionMode

from framework.base.config import Config
from framework.core.measurements import FROZEN_USED
from framework.core.run_ctx import RunCtx
from framework.core.state import RunState
from framework.debug.first_step import SharedRunCheck


class FrozenUse(SharedRunCheck):
    """Provides FROZEN_USED: the ids of the frozen parameters the first step's shared run passed to torch."""

    check = "frozen-parameter use"
    provides = (FROZEN_USED,)

    @classmethod
    def from_config(cls, config: Config, state: RunState) -> FrozenUse | None:
        return cls()

    def applies(self, state: RunState) -> bool:
        return any(not p.requires_grad for p in state.model.parameters())

    @contextlib.contextmanager
    def observe(self, state: RunState, model: nn.Module) -> Iterator[_Uses]:
        frozen = {id(p) for p in model.parameters() if not p.requires_grad}
        with _Uses(frozen) as uses:
            yield uses

    def conclude(self, state: RunState, seen: _Uses, run_ctx: RunCtx | None) -> None:
        state.store.put(FROZEN_USED, frozenset(seen.used), by=self)


class _Uses(TorchFunctionMode):
    """Follows the values of the frozen parameters: a frozen parameter is used when its values, or values computed
    from them, enter an operation whose result takes part in the gradient (a cosine head's normalised weight times
    the trained features). Computations that stay out of the gradient (an EMA's own update under no_grad, shapes,
    copies) are no use."""

    def __init__(self, frozen: set[int]):
        super().__init__()
        self.frozen = frozen
        self.used: set[int] = set()
        self._derived: dict[int, tuple[weakref.ref, frozenset[int]]] = {}  # id -> (tensor, the frozen ids behind it)

    def _sources(self, t: torch.Tensor) -> frozenset[int]:
        if id(t) in self.frozen:
            return frozenset((id(t),))
        kept = self._derived.get(id(t))
        return kept[1] if kept is not None and kept[0]() is t else frozenset()

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        try:
            tensors = [t for v in (*args, *kwargs.values()) for t in (v if isinstance(v, list | tuple) else (v,))]
            sources = frozenset().union(*(self._sources(t) for t in tensors if isinstance(t, torch.Tensor)))
            if sources:
                many = out if isinstance(out, list | tuple) else (out,)
                outputs = [t for t in many if isinstance(t, torch.Tensor)]
                if any(t.requires_grad for t in outputs):
                    self.used |= sources
                for t in outputs:
                    if id(t) not in self.frozen:
                        self._derived[id(t)] = (weakref.ref(t), sources)
        except Exception:  # noqa: BLE001 - the observation must never change the run
            pass
        return out


PLUGINS = (FrozenUse,)
