"""Which frozen parameters the first step uses (``FROZEN_USED``), for the sanity check's judgement of them.

A frozen parameter of a module the step never runs (EMA weights kept for evaluation) is no mistake: it would get no
gradient either way. Forward hooks see which modules run, but not a parameter that the step uses without calling its
module (a cosine head's ``F.normalize(self.fc.weight)``, a ``ParameterList``). This plugin watches the first-step
checks' shared run of the first batch, in training mode as the real step, and records every frozen parameter whose
values enter the gradient's computation there.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import torch
from torch import nn
from torch.overrides import TorchFunctionMode
from torch.utils.weak import WeakIdKeyDictionary

from framework.base.config import Config
from framework.check_library.tensors import iter_tensors
from framework.core.measurements import FROZEN_USED
from framework.core.run_ctx import RunCtx
from framework.core.state import RunState
from framework.debug.first_step import SharedRunCheck


class FrozenUse(SharedRunCheck):
    """Provides FROZEN_USED: the ids of the frozen parameters whose values enter the gradient's computation in the
    first step's shared run."""

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
        self._derived = WeakIdKeyDictionary()  # tensor -> the ids of the frozen parameters behind its values

    def _sources(self, t: torch.Tensor) -> frozenset[int]:
        return frozenset((id(t),)) if id(t) in self.frozen else self._derived.get(t, frozenset())

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        try:
            sources = frozenset().union(*map(self._sources, iter_tensors((args, kwargs))))
            if sources:
                outputs = list(iter_tensors(out))
                if any(t.requires_grad for t in outputs):
                    self.used |= sources
                for t in outputs:
                    if id(t) not in self.frozen:
                        self._derived[t] = sources
        except Exception:  # noqa: BLE001 - the observation must never change the run
            pass
        return out


PLUGINS = (FrozenUse,)
