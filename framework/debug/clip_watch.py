"""A gradient-norm clip that shrinks every gradient by orders of magnitude (``debug_clip_watch``, on by default).

A clip of the gradient norm is a safeguard: most steps pass under it, a spike is cut. When every gradient it sees is
a hundred or more times its ``max_norm`` and the optimizer's update is proportional to the gradient (SGD, with or
without momentum), the size of each update is ``max_norm`` times the learning rate whatever the gradient, and the
learning rate the run was configured with is not what it applies. (Adam and its relatives divide by the gradient's
running RMS, so a clip that scales every gradient alike barely changes their updates: not judged.) The norms are then on
another scale than the threshold: gradients still multiplied by a loss scale (clipped before they are unscaled, as
mixed-precision code written in the wrong order does), a loss weight or a sum over a long batch that the threshold
did not account for, or a threshold meant for another model.

Configured against applied, over epoch 1: every call of torch's ``clip_grad_norm_`` (the user's code, a library's,
or this framework's ``gradient_clip_global_norm``) is observed through the function it ends in
(``torch.nn.utils.clip_grad._clip_grads_with_norm_``, which gets the threshold and the norm it measured), without
changing what it does; the norms are read at the end of the epoch (no host sync per step). When the losses were
marked with a ``scale``, the norms divided by it say whether that scale is what the clip sees.
"""

from __future__ import annotations

import statistics
import sys
from typing import Any

import torch
import torch.nn.utils.clip_grad as clip_grad

from framework.base.config import Config
from framework.base.findings import Finding, report
from framework.base.options import register
from framework.check_library.tensors import calling_user_frame, format_frame
from framework.core.events import Event
from framework.core.plugin import Order, Plugin, on
from framework.core.state import RunState
from framework.debug.group_keys import optimizers_of
from framework.training import clipping

register(
    "debug_clip_watch",
    "bool",
    True,
    "Over epoch 1: warn when a gradient-norm clip (clip_grad_norm_, the user's or gradient_clip_global_norm) cut "
    "nearly every gradient it saw by 100x or more: the updates' size is then set by max_norm, not by the learning rate.",
    __name__,
)

FACTOR = 100.0  # a clip that cuts a gradient by this factor or more ...
SHARE = 0.9  # ... at this share of its calls ...
MIN_CALLS = 20  # ... over at least this many calls sets the update size instead of the gradient
KEPT = 1000  # norms kept per epoch (the first ones)
LOSS_SCALE = 100.0  # a marked loss scale at least this large can be what puts the norms above the threshold
PROPORTIONAL = (torch.optim.SGD, torch.optim.ASGD)
_TORCH_CLIP = getattr(
    clip_grad, "_clip_grads_with_norm_", None
)  # torch's own, as this module found it  # optimizers whose update is the learning rate times the gradient


def _caller() -> str | None:
    """Who clipped: this framework's option, or the user's source line that called clip_grad_norm_."""
    frame = sys._getframe(2)  # clip_grad_norm_'s caller
    while frame is not None and frame.f_code.co_filename == clip_grad.__file__:
        frame = frame.f_back
    if frame is not None and frame.f_code.co_filename == clipping.__file__:
        return "of gradient_clip_global_norm"
    user = calling_user_frame()
    return f"at {format_frame(user)}" if user is not None else None


class ClipWatch(Plugin):
    """Observes torch's gradient-norm clipping over epoch 1 and warns when it cut nearly every gradient 100-fold."""

    bug_check = ("debug_clip_watch",)

    order = Order.OBSERVE

    def __init__(self) -> None:
        self.calls: list[tuple[float, torch.Tensor]] = []  # (max_norm, the norm measured)
        self.where: str | None = None
        self.scales: set[float] = set()
        self._wrapper: Any = None

    @classmethod
    def from_config(cls, config: Config, state: RunState) -> ClipWatch | None:
        return cls() if config.bool("debug_clip_watch") else None

    @on(Event.STARTUP)
    def observe(self, state: RunState) -> None:
        if _TORCH_CLIP is None:
            return  # another torch: the function is internal

        def clip_grads_with_norm(parameters: Any, max_norm: float, total_norm: torch.Tensor, *args, **kwargs):
            if len(self.calls) < KEPT and isinstance(total_norm, torch.Tensor):
                self.calls.append((float(max_norm), total_norm.detach()))
                if self.where is None:
                    self.where = _caller()
            return _TORCH_CLIP(parameters, max_norm, total_norm, *args, **kwargs)

        # always around torch's own function: a run that ended without putting its wrapper back (killed between
        # its startup and its end) must not leave the next run in this process unobserved
        self._wrapper = clip_grads_with_norm
        clip_grad._clip_grads_with_norm_ = clip_grads_with_norm

    @on(Event.AFTER_FORWARD, once=True)
    def loss_scales(self, state: RunState) -> None:
        if state.run_ctx is not None:
            self.scales = {m.scale for m in state.run_ctx.losses.values() if not m.as_error}

    @on(Event.EPOCH_END, once=True)
    def judge(self, state: RunState) -> None:
        self._restore()
        optimizers = optimizers_of(state.optimizer).values()
        # Adam and its relatives divide by the gradient's running RMS: a clip that scales every gradient alike
        # leaves their updates as they were, so only an update proportional to the gradient is set by max_norm
        if not optimizers or not all(isinstance(opt, PROPORTIONAL) for opt in optimizers):
            return
        finding = self._finding()
        if finding is not None:
            report(finding)

    @on(Event.CLOSE)
    def release(self, state: RunState) -> None:
        self._restore()

    def _restore(self) -> None:
        if self._wrapper is not None and clip_grad._clip_grads_with_norm_ is self._wrapper:
            clip_grad._clip_grads_with_norm_ = _TORCH_CLIP
        self._wrapper = None

    def _finding(self) -> Finding | None:
        if len(self.calls) < MIN_CALLS:
            return None
        try:
            norms = [float(n) for _, n in self.calls]
        except (RuntimeError, TypeError, ValueError):  # a norm that is no plain number here (a sharded one)
            return None
        factors = [norm / max_norm for (max_norm, _), norm in zip(self.calls, norms, strict=True) if max_norm > 0]
        cut = [f for f in factors if f >= FACTOR]
        if len(factors) < MIN_CALLS or len(cut) < SHARE * len(factors):
            return None
        max_norm = statistics.median(m for m, _ in self.calls)
        median = statistics.median(norms)
        where = f" {self.where}" if self.where else ""
        scaled = [s for s in self.scales if s >= LOSS_SCALE and median / s <= 10 * max_norm]
        if scaled:
            why = (
                f"The losses are marked with scale {scaled[0]:g}, and the norms divided by it (median "
                f"{median / scaled[0]:.3g}) are on the threshold's scale: the clip sees the gradients of the loss "
                f"multiplied by its scale (gradients clipped before they are unscaled)."
            )
        else:
            why = (
                "Norms that far above the threshold are on another scale than it: gradients still multiplied by a "
                "loss scale (clipped before they are unscaled), a loss weight or a sum over a long batch that the "
                "threshold does not account for, or a threshold meant for another model."
            )
        return Finding(
            "warning",
            "sanity check",
            f"The gradient-norm clip{where} (max_norm {max_norm:g}) cut {len(cut)} of the {len(factors)} gradients it "
            f"saw in epoch 1 by {FACTOR:g}x or more (median norm {median:.3g}, a factor of {median / max_norm:.3g}): "
            f"the size of every update is set by max_norm, whatever the gradient, so the learning rate is not what "
            f"is applied. {why}",
            evidence={
                "max_norm": max_norm,
                "calls": len(factors),
                "cut_100x": len(cut),
                "median_norm": median,
                **({"loss_scale": scaled[0]} if scaled else {}),
            },
            where={"clip": self.where} if self.where else {},
            fix="Clip the gradients on the loss's own scale (unscale them first: scaler.unscale_(optimizer) before "
            "clip_grad_norm_), or choose max_norm from the norms the run logs.",
            option="debug_clip_watch = False",
        )


PLUGINS = (ClipWatch,)
