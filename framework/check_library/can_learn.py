"""Can the model learn? Fitting one batch on a copy, units of a layer that stay identical, parameters that
never move.

A model that cannot bring the loss of one batch down in a few dozen Adam steps has a bug in the model or
the loss (or nothing of the input reaches it); one that can, while the real run sits at chance, points
to the data, the labels or the optimization. Units of one layer with identical weights (a constant
initialisation) receive identical gradients and never become different. A parameter that gets a gradient
but never changes is not updated by the optimizer (not in its param groups, a learning rate of 0).
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass, field

import torch

from framework.check_library.sharded import stored
from framework.core.run_ctx import RunCtx

# Steps of the one-batch fit, and its optimizer's learning rate (high: a batch is fitted in few steps).
FIT_STEPS = 50
FIT_LEARNING_RATE = 1e-2
# The fit succeeds when the loss falls to at most this fraction of its start (or of the way to its floor).
FITS = 0.5


@dataclass
class Fit:
    """The losses of the one-batch fit, first to last; whether it fits."""

    losses: list[float] = field(default_factory=list)
    floor: float = 0.0
    trained: set[str] = field(default_factory=set)  # the parameters that got a (nonzero) gradient

    @property
    def fits(self) -> bool:
        first, last = self.losses[0], min(self.losses[-3:])
        return last - self.floor <= FITS * (first - self.floor)


def fit_one_batch(
    model: torch.nn.Module, run: Callable[[torch.nn.Module], RunCtx], floor: float = 0.0, train: bool = True
) -> Fit:
    """Train a deep copy of ``model`` (its own parameters) with Adam for ``FIT_STEPS`` steps on the batch that
    ``run(copy)`` runs ``train_step`` on, the copy in training mode (or in eval mode: ``train=False``, dropout off
    and batch statistics fixed); the caller isolates the run (RNG, output). Raises what deepcopy raises for a
    model that cannot be copied."""
    fitted = copy.deepcopy(model)
    fitted.train(train)
    params = [p for p in fitted.parameters() if p.requires_grad]
    optimizer = torch.optim.Adam(params, lr=FIT_LEARNING_RATE)
    fit = Fit(floor=floor)
    for _ in range(FIT_STEPS):
        optimizer.zero_grad(set_to_none=True)
        loss = run(fitted).total_loss()
        fit.losses.append(float(loss.detach()))
        if not torch.isfinite(loss):
            break
        loss.backward()
        optimizer.step()
    fit.trained = {n for n, p in fitted.named_parameters() if p.grad is not None and bool(p.grad.any())}
    return fit


def identical_units(model: torch.nn.Module) -> list[tuple[str, int]]:
    """(parameter name, output units) of each weight (2 or more dims, at least 2 outputs) whose units all have
    the same weights: they get the same gradient and stay alike whatever the data."""
    found = []
    with torch.no_grad():
        for name, p in model.named_parameters():
            if p.dim() < 2 or p.shape[0] < 2 or not p.requires_grad:
                continue
            rows = p.detach().reshape(p.shape[0], -1)
            if bool((rows == rows[:1]).all()):
                found.append((name, p.shape[0]))
    return found


def fingerprint(model: torch.nn.Module) -> torch.Tensor:
    """Per parameter its sum and sum of squares, on the device (no host sync): equal later means unchanged."""
    with torch.no_grad():
        values = [stored(p.detach()).float() for p in model.parameters()]
        rows = [torch.stack([v.sum(), v.square().sum()]) for v in values]
    return torch.stack(rows) if rows else torch.zeros(0, 2)


def unchanged(model: torch.nn.Module, before: torch.Tensor, trained: set[str]) -> list[str]:
    """The names among ``trained`` (parameters that get a gradient) whose fingerprint equals ``before``."""
    now = fingerprint(model)
    if now.shape != before.shape:
        return []
    same = (now == before.to(now.device)).all(1).tolist()
    return [name for (name, _), equal in zip(model.named_parameters(), same, strict=True) if equal and name in trained]
