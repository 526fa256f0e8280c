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
from collections.abc import Iterator
from typing import Any

import torch
from torch import nn
from torch.overrides import TorchFunctionMode
from torch.utils.weak import WeakIdKeyDictionary

from framework.base.config import Config
from framework.base.options import register
from framework.check_library.tensors import calling_user_frame, format_frame, iter_tensors
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
# A parameter-free operation that brings the values' root mean square this many times closer to 1 changed their scale
# (x / 255, a standardisation); one that keeps it within this factor (a resize, a pooling, a mask) did not.
SCALED = 10.0


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
    """Follows the dense input keys through one run; ``verdicts`` (after it): key -> (its raw scale reached a
    nonlinearity, what happened to it and where).

    A followed tensor is raw (within ``SCALED`` of the key's own root mean square: rearranged, cast, resized, pooled
    or masked), affine (raw values through maps with parameters that are affine: a linear layer, a convolution,
    frozen or not, and their bias) or changed (its scale moved ``SCALED`` times toward 1 before any layer: ``x / 255``,
    a standardisation). Raw or affine values that reach anything else (an activation, a residual sum with other
    values) make the key's verdict; a normalisation of them is remembered, and the key is followed on."""

    def __init__(self, inputs: dict[int, tuple[torch.Tensor, str]]):
        super().__init__()
        self._scale = {key: _rms(t) for t, key in inputs.values()}
        self._reached: dict[str, str] = {}  # key -> where its raw scale reached a nonlinearity
        self._eased: dict[str, str] = {}  # key -> the first change or normalisation of its scale
        # tensor -> (key, stage, where: the first layer (affine) or the change (changed)), by identity
        self._origin = WeakIdKeyDictionary()
        for t, key in inputs.values():
            self._origin[t] = (key, RAW, "")

    @property
    def verdicts(self) -> dict[str, tuple[bool, str]]:
        verdicts = {
            key: (True, f"they reach a nonlinearity at their raw scale ({where})")
            for key, where in self._reached.items()
        }
        return verdicts | {key: (False, what) for key, what in self._eased.items() if key not in self._reached}

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        try:
            self._follow(func, [*args, *kwargs.values()], out)
        except Exception:  # noqa: BLE001 - the observation must never change the user's run
            pass
        return out

    def _follow(self, func: Any, args: list, out: Any) -> None:
        tensors, outputs = list(iter_tensors(args)), list(iter_tensors(out))
        followed = [o for o in map(self._origin.get, tensors) if o is not None and o[0] not in self._reached]
        if not followed or not outputs:  # a query (size, dim, a comparison to a Python value) changes nothing
            return
        name = getattr(func, "__name__", "")
        here = f"{name} at {format_frame(calling_user_frame())}"
        layer = any(isinstance(t, nn.Parameter) for t in tensors)
        for key in {k for k, _, _ in followed}:
            stages = {stage for k, stage, _ in followed if k == key}
            first = next((w for k, stage, w in followed if k == key and stage == AFFINE), here)
            if name in NORMALISE:
                if stages != {CHANGED}:
                    self._eased.setdefault(key, f"a normalisation removes their scale first ({here})")
                continue
            if stages == {CHANGED}:
                continue  # changed values: whatever follows is the model's business
            if layer:
                if name in AFFINE_OPS:
                    self._mark(outputs, tensors, key, AFFINE, first)
                else:
                    self._reached[key] = here
                continue
            if stages == {RAW}:
                scale = _rms(outputs[0]) if outputs[0].is_floating_point() else self._scale[key]
                if scale * SCALED <= self._scale[key] and self._scale[key] > SCALED:
                    self._eased.setdefault(key, f"the step scales them before the first layer ({here})")
                    self._mark(outputs, tensors, key, CHANGED, here)
                else:
                    self._mark(outputs, tensors, key, RAW, "")
            elif name in KEEP:
                self._mark(outputs, tensors, key, AFFINE, first)
            else:  # learned affine maps of the raw values reach an activation, or a sum with other values
                self._reached[key] = first

    def _mark(self, outputs: list[torch.Tensor], inputs: list[torch.Tensor], key: str, stage: str, where: str) -> None:
        for t in outputs:
            if not any(t is i for i in inputs) or stage != RAW:
                self._origin[t] = (key, stage, where)


def _rms(t: torch.Tensor) -> float:
    return float(t.detach().double().square().mean().sqrt()) if t.numel() else 0.0


PLUGINS = (InputScale,)
