"""Do the inputs reach the first learned layer at their raw scale? (``debug_input_scale``, on by default.)

The startup data check sees what a dataset holds: integers in [0, 255] (raw pixels), features far from unit
scale. What the model learns from is what its first learned layer receives, and a step or a model that divides by
255, standardises, or normalises first (a batch norm in front) has scaled them by design. This check watches the
first-step checks' run of the unchanged first batch and follows each dense input key through the operations that
keep its values (casts, views, indexing, concatenation, padding, dropout) and through learned affine maps (a linear
layer, a convolution, their bias). The data check's range warning about that key stands when its raw scale reaches a
nonlinearity that way, and becomes a note, saying where, when the step or the model changed the values before the
first learned operation (``x / 255``), or a normalisation removed their scale first (a batch norm in front, or after
the first linear layer).
"""

from __future__ import annotations

import contextlib
import weakref
from collections.abc import Iterator
from typing import Any

import torch
from torch import nn
from torch.overrides import TorchFunctionMode

from framework.base.config import Config
from framework.base.options import register
from framework.check_library.tensors import calling_user_frame, format_frame
from framework.core.measurements import INPUT_SCALES
from framework.core.run_ctx import RunCtx
from framework.core.state import RunState
from framework.debug.first_step import SharedRunCheck

CHECK = "input-scale check"
register(
    "debug_input_scale",
    "bool",
    True,
    "At the first step: follow each dense input key to the first learned or normalising operation; the data check's "
    "warning about its raw scale stands only when the raw values arrive there.",
    __name__,
)

# Operations whose output holds the values of their input, rearranged or cast: the raw scale passes through.
KEEP = frozenset(
    "to float double half bfloat16 type view reshape permute transpose flatten unflatten unsqueeze squeeze "
    "contiguous clone __getitem__ cat concat concatenate stack expand expand_as narrow movedim moveaxis view_as "
    "reshape_as detach pad flip roll split chunk unbind repeat index_select select t dropout".split()
)
# Operations that normalise what they get: raw values arriving there are scaled by design.
NORMALISE = frozenset("batch_norm layer_norm group_norm instance_norm rms_norm normalize".split())
# Learned operations that are affine in their input: a normalisation after them still removes the input's scale.
AFFINE_OPS = frozenset(
    "linear conv1d conv2d conv3d conv_transpose1d conv_transpose2d matmul mm bmm addmm add sub".split()
)
RAW, AFFINE, CHANGED = "raw", "affine", "changed"


class InputScale(SharedRunCheck):
    """Decides, per dense input key, whether its raw values reach the first learned operation (INPUT_SCALES)."""

    bug_check = ("debug_input_scale",)
    check = CHECK
    provides = (INPUT_SCALES,)

    @classmethod
    def from_config(cls, config: Config, state: RunState) -> InputScale | None:
        return cls() if config.bool("debug_input_scale") else None

    def applies(self, state: RunState) -> bool:
        return bool(_dense_inputs(state))

    @contextlib.contextmanager
    def observe(self, state: RunState, model: nn.Module) -> Iterator[_Follow]:
        with _Follow(_dense_inputs(state)) as follow:
            yield follow

    def conclude(self, state: RunState, seen: _Follow, run_ctx: RunCtx | None) -> None:
        state.store.put(INPUT_SCALES, dict(seen.verdicts), by=self)


def _dense_inputs(state: RunState) -> dict[int, tuple[torch.Tensor, str]]:
    """The batch's dense keys (not class ids, not lengths): id -> (tensor, key)."""
    found = {}
    for name, value in (state.batch or {}).items():
        key = state.extern_data.get(name) if ":" not in name else None
        if key is not None and key.sparse_dim is None and isinstance(value, torch.Tensor) and value.dim() > 0:
            found[id(value)] = (value, name)
    return found


class _Follow(TorchFunctionMode):
    """Follows the dense input keys; ``verdicts``: key -> (its raw scale reached a nonlinearity, what happened to it
    and where).

    A followed tensor is raw (the key's values, rearranged or cast), affine (raw values through learned affine maps
    only: a linear layer, a convolution, their bias) or changed (by anything else before any learned operation).
    A normalisation of raw or affine values removes their scale (Linear then BatchNorm is scale-free)."""

    def __init__(self, inputs: dict[int, tuple[torch.Tensor, str]]):
        super().__init__()
        self.verdicts: dict[str, tuple[bool, str]] = {}
        # id -> (weak reference, key, stage, where: the first learned operation (affine) or the change (changed))
        self._origin: dict[int, tuple[weakref.ref, str, str, str]] = {
            i: (weakref.ref(t), key, RAW, "") for i, (t, key) in inputs.items()
        }

    def _of(self, t: torch.Tensor) -> tuple[str, str, str] | None:
        kept = self._origin.get(id(t))
        if kept is None or kept[0]() is not t:
            return None
        return kept[1], kept[2], kept[3]

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        try:
            self._follow(func, [*args, *kwargs.values()], out)
        except Exception:  # noqa: BLE001 - the observation must never change the user's run
            pass
        return out

    def _follow(self, func: Any, args: list, out: Any) -> None:
        tensors = [a for a in args if isinstance(a, torch.Tensor)]
        tensors += [t for a in args if isinstance(a, list | tuple) for t in a if isinstance(t, torch.Tensor)]
        followed = [o for o in map(self._of, tensors) if o is not None and o[0] not in self.verdicts]
        if isinstance(out, torch.Tensor):
            outputs = [out]
        elif isinstance(out, list | tuple):
            outputs = [t for t in out if isinstance(t, torch.Tensor)]
        else:
            outputs = []
        if not followed or not outputs:  # a query (size, dim, a comparison to a Python value) changes nothing
            return
        name = getattr(func, "__name__", "")
        here = f"{name} at {format_frame(calling_user_frame())}"
        learned = any(isinstance(t, nn.Parameter) and t.requires_grad for t in tensors)
        key, stages = followed[0][0], {stage for _, stage, _ in followed}
        first = next((w for _, stage, w in followed if stage == AFFINE), here)
        if name in NORMALISE:
            if stages != {CHANGED}:
                self.verdicts[key] = (False, f"a normalisation removes their scale before any nonlinearity ({here})")
            return
        if CHANGED in stages:
            stage, where = CHANGED, next(w for _, stage, w in followed if stage == CHANGED)
            if learned:  # the first learned operation gets values the step changed first
                self.verdicts[key] = (False, f"the step changes them before the first learned layer ({where})")
                return
        elif name in KEEP:
            stage, where = (AFFINE, first) if AFFINE in stages else (RAW, "")
        elif learned and name in AFFINE_OPS:
            stage, where = AFFINE, first
        elif stages == {RAW} and not learned:
            stage, where = CHANGED, here
        else:  # raw values, or learned affine maps of them, reach a nonlinearity (or a learned non-affine operation)
            self.verdicts[key] = (True, f"they reach a nonlinearity at their raw scale (first learned layer: {first})")
            return
        for t in outputs:
            if not any(t is i for i in tensors) or name.endswith("_"):
                self._origin[id(t)] = (weakref.ref(t), key, stage, where)


PLUGINS = (InputScale,)
