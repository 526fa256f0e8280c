"""Gradient accumulation (``accum_grad_multiple_step``): how much each micro-batch's losses count.

The accumulated gradient of a window must be the gradient of one batch holding all of its
sequences. For a loss the optimizer sees as a sum (a per-frame loss by RETURNN's convention, or
``use_normalized_loss=False``) that is the plain sum of the micro-batches' gradients: each counts
fully. A normalized loss (a mean) is a mean over its own micro-batch, so each micro-batch counts
by its share of the window's sequences; that is exact when the loss is a mean over sequences, and
only approximate when it is a mean over frames of varying lengths (the update-integrity check
names that case on the first window: ``framework.debug.update_integrity``).

A RETURNN config (``run_ctx.returnn_convention``) accumulates as RETURNN's torch engine does
(``Engine.train_epoch``: each micro-batch's total loss is backpropagated as it is): every
micro-batch's losses count fully, so a mean loss adds up the micro-batches' means.
"""

from __future__ import annotations

import random
from typing import Any

import numpy as np
import torch

from framework.core.run_ctx import RunCtx, returnn_convention


def sequence_shares(plan: list[np.ndarray], accum: int) -> list[float] | None:
    """Per batch of ``plan``, its share of the sequences of its accumulation window (None: no accumulation, or a
    RETURNN config's, where every batch counts fully)."""
    if accum <= 1 or returnn_convention():
        return None
    shares = []
    for start in range(0, len(plan), accum):
        window = plan[start : start + accum]
        total = sum(len(b) for b in window)
        shares.extend(len(b) / total for b in window)
    return shares


def loss_weights(run_ctx: RunCtx, share: float) -> dict[str, float]:
    """Per optimized loss of a micro-batch, the factor it counts with in the window (``share``: its sequences';
    in a RETURNN config every loss counts fully, as RETURNN's engine backpropagates it)."""
    if returnn_convention():
        share = 1.0
    return {name: 1.0 if m.optimize_sum else share for name, m in run_ctx.losses.items() if not m.as_error}


def weights(run_ctx: RunCtx, share: float | None) -> dict[str, float] | None:
    """``loss_weights``, or None without accumulation (every loss counts fully)."""
    return None if share is None else loss_weights(run_ctx, share)


def accumulated_loss(run_ctx: RunCtx, share: float | None) -> torch.Tensor:
    """What the engine backpropagates for one micro-batch: its total loss, each loss weighted for the window."""
    return run_ctx.total_loss(weights(run_ctx, share))


def update_boundary(state: Any) -> bool:
    """RunState.at_update_boundary (see there); a function's verdict is kept per step, as it is asked several times."""
    config = state.config
    function = getattr(config, "accum_function", None)
    if function is None:
        accum = config.int("accum_grad_multiple_step")
        ends_window = (state.step_in_epoch + 1) % accum == 0
        return ends_window or (state.step_in_epoch + 1 == state.steps_in_epoch and not returnn_convention())
    cache = state.__dict__.setdefault("_accum_windows", {})
    key = (state.epoch, state.step_in_epoch)
    if key not in cache:
        if state.step_in_epoch == 0 or cache.get("last_key", (None, None))[0] != state.epoch:
            cache["count"] = 0  # RETURNN counts each epoch's windows from its first step
        cache["count"] += 1
        frac = (state.step_in_epoch + 1) / max(state.steps_in_epoch, 1)
        accum = function(
            epoch=state.epoch,
            epoch_continuous=state.epoch - 1 + frac,
            global_train_step=state.global_step,
            **{f"__fwd_compatible_random_arg_{int(random.random() * 100)}": None},
        )
        cache[key] = cache["count"] >= accum
        if cache[key]:
            cache["count"] = 0
        cache["last_key"] = key
    return cache[key]
