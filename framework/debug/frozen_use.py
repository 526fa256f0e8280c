"""Which frozen parameters the first step uses (``FROZEN_USED``), for the sanity check's judgement of them.

A frozen parameter of a module the step never runs (EMA weights kept for evaluation) is no mistake: it would get no
gradient either way. Forward hooks see which modules run, but not a parameter that the step uses without calling its
module (a cosine head's ``F.normalize(self.fc.weight)``, a ``ParameterList``). This plugin watches the first-step
checks' shared run of the first batch, in training mode as the real step, and records every frozen parameter that
is an argument of a torch function there.
"""

from __future__ import annotations

import contextlib
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
    def __init__(self, frozen: set[int]):
        super().__init__()
        self.frozen = frozen
        self.used: set[int] = set()

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        name = getattr(func, "__name__", "")
        # An attribute read (.shape, .data) is no use, nor is an in-place update of the parameter itself (an EMA moved
        # toward the trained weights): a use feeds its values into the step's computation.
        if name != "__get__":
            values = (*args[1:], *kwargs.values()) if name.endswith("_") else (*args, *kwargs.values())
            for value in values:
                for t in value if isinstance(value, list | tuple) else (value,):
                    if isinstance(t, torch.Tensor) and id(t) in self.frozen:
                        self.used.add(id(t))
        return func(*args, **kwargs)


PLUGINS = (FrozenUse,)
