"""What ``load_state_dict(..., strict=False)`` loaded while ``get_model`` built the model.

``strict=False`` is how fine-tuning loads a pretrained body into a model with a new head: the head's keys are
missing, the old head's unexpected, and both lists are returned for the caller to read. It is also how a checkpoint
whose keys carry another prefix (a training wrapper's ``model.``, DataParallel's ``module.``) loads nothing at all
without an error. ``record_loads`` watches ``get_model``; ``loads_of`` answers for a model afterwards.
"""

from __future__ import annotations

import contextlib
import functools
import traceback
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass

from torch import nn

from framework.check_library.tensors import calling_user_frame


@dataclass(frozen=True)
class StateLoad:
    """One ``load_state_dict(..., strict=False)`` call: into which module (its class), from where, what it got."""

    tensors: frozenset[int]  # ids of the loaded module's parameters and buffers (a model may reuse its children)
    module_class: str
    frame: traceback.FrameSummary | None
    keys: tuple[str, ...]  # the state dict's keys
    missing: tuple[str, ...]  # the module's keys the state dict did not have
    unexpected: tuple[str, ...]  # the state dict's keys the module does not have

    @property
    def loaded(self) -> int:
        """How many tensors were loaded (a shape mismatch raises even when not strict)."""
        return len(self.keys) - len(self.unexpected)

    def prefix(self) -> tuple[str, str, int] | None:
        """The prefix that separates the unexpected keys from the missing ones: ("extra", p, n) when n unexpected keys
        are missing keys with ``p`` in front (a wrapper's ``model.``), ("lacking", p, n) when n missing keys are
        unexpected ones with ``p`` in front (a model loaded into its own submodule); None when none explains at
        least half of the unexpected keys."""
        missing, unexpected = set(self.missing), set(self.unexpected)
        extra = Counter(u[: -len(m)] for u in unexpected for m in missing if u.endswith("." + m))
        lacking = Counter(m[: -len(u)] for m in missing for u in unexpected if m.endswith("." + u))
        best = max(
            [("extra", *c) for c in extra.most_common(1)] + [("lacking", *c) for c in lacking.most_common(1)],
            key=lambda c: c[2],
            default=None,
        )
        return best if best is not None and 2 * best[2] >= len(unexpected) else None


_loads: list[StateLoad] = []


def loads_of(model: nn.Module) -> list[StateLoad]:
    """The non-strict loads recorded into modules whose parameters or buffers ``model`` holds (the module itself, or
    its children reused in another container)."""
    held = {id(t) for t in [*model.parameters(), *model.buffers()]}
    return [load for load in _loads if load.tensors & held]


@contextlib.contextmanager
def record_loads() -> Iterator[None]:
    """Record, while the block runs, each ``nn.Module.load_state_dict`` called with ``strict=False``."""
    original = nn.Module.load_state_dict
    _loads.clear()  # one model build at a time: the previous build's records go

    @functools.wraps(original)
    def load_state_dict(self, state_dict, *args, **kwargs):
        result = original(self, state_dict, *args, **kwargs)
        strict = kwargs.get("strict", args[0] if args else True)
        if not strict and hasattr(result, "missing_keys"):
            _loads.append(
                StateLoad(
                    frozenset(id(t) for t in [*self.parameters(), *self.buffers()]),
                    type(self).__name__,
                    calling_user_frame(),
                    tuple(state_dict.keys()),
                    tuple(result.missing_keys),
                    tuple(result.unexpected_keys),
                )
            )
        return result

    nn.Module.load_state_dict = load_state_dict
    try:
        yield
    finally:
        nn.Module.load_state_dict = original
