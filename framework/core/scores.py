"""Accumulating loss values over an epoch without a host sync per step."""

from __future__ import annotations

from collections.abc import Callable

import torch

from framework.core.run_ctx import MarkedLoss, RunCtx

Scores = dict[str, dict[str, float]]  # {dataset: {loss: value}}, e.g. {"dev_other": {"ce": 1.2}}


class ScoreAccumulator:
    """Dataset-level scores: each loss averaged over sequences, or over its normalization units.

    Losses without ``custom_inv_norm_factor`` count as means over the batch's sequences, so the
    epoch score is weighted by sequences. On an accelerator the sums stay on the device until
    ``result()`` (no host sync per step); on the CPU, where reading a value waits for nothing, they
    are Python floats: two tensor ops per step and loss cost more than the rest of this class.
    """

    def __init__(self) -> None:
        self._sums: dict[str, torch.Tensor | float] = {}
        self._weights: dict[str, torch.Tensor | float] = {}

    def add(self, run_ctx: RunCtx, num_seqs: int) -> None:
        """Add the losses of one step."""
        for name, marked in run_ctx.losses.items():
            value, weight = _sum_and_weight(marked, num_seqs)
            if name in self._sums:
                self._sums[name] = self._sums[name] + value
                self._weights[name] = self._weights[name] + weight
            else:
                self._sums[name], self._weights[name] = value, weight

    def state_dict(self) -> dict[str, dict]:
        """The running sums (for a mid-epoch checkpoint)."""
        return {"sums": dict(self._sums), "weights": dict(self._weights)}

    def load_state_dict(self, state: dict[str, dict]) -> None:
        """Continue from ``state_dict``."""
        self._sums, self._weights = dict(state["sums"]), dict(state["weights"])

    def result(self, total: Callable[[torch.Tensor], torch.Tensor] | None = None) -> dict[str, float]:
        """The averaged scores (one host sync); ``total`` sums the running sums over processes first."""
        names = list(self._sums)
        if total is None:
            return {name: float(self._sums[name] / self._weights[name]) for name in names}
        first = self._sums[names[0]] if names else None
        device = first.device if isinstance(first, torch.Tensor) else torch.device("cpu")
        sums = [torch.as_tensor(self._sums[n], dtype=torch.float64, device=device) for n in names]
        weights = [torch.as_tensor(self._weights[n], dtype=torch.float64, device=device) for n in names]
        summed = total(torch.stack(sums + weights)).tolist() if names else []
        return {name: summed[i] / summed[len(names) + i] for i, name in enumerate(names)}


def to_host(value: torch.Tensor | float) -> torch.Tensor | float:
    """A running sum as a checkpoint and the other ranks can take it: on the CPU."""
    return value.cpu() if isinstance(value, torch.Tensor) else value


def rank_share(saved: dict, rank: int, size: int) -> tuple[dict[str, dict], int]:
    """What ``rank`` of ``size`` continues from the score sums of a mid-epoch checkpoint, and how many ranks wrote them.

    ``saved`` holds each rank's sums (``{"ranks": [...]}``; older checkpoints: one process's). With as many ranks
    as wrote them, each rank takes its own; with another number, rank 0 takes their total and the others start at
    zero, so that the sum over the ranks is still the epoch's.
    """
    ranks = saved["ranks"] if "ranks" in saved else [saved]
    if len(ranks) == size:
        return ranks[rank], size
    if rank != 0:
        return {"sums": {}, "weights": {}}, len(ranks)
    total: dict[str, dict] = {"sums": {}, "weights": {}}
    for share in ranks:
        for part, values in share.items():
            for name, value in values.items():
                total[part][name] = total[part][name] + value if name in total[part] else value
    return total, len(ranks)


def _sum_and_weight(marked: MarkedLoss, num_seqs: int) -> tuple[torch.Tensor | float, torch.Tensor | float]:
    """A step's share of the epoch score of ``marked``: its sum and what the sum is divided by."""
    loss, norm = marked.loss, marked.custom_inv_norm_factor
    if loss.is_cpu:  # a read waits for nothing here: Python numbers instead of a tensor op or two per step
        loss, norm = marked.host_values()
    else:
        loss, norm = loss.detach(), norm.detach() if isinstance(norm, torch.Tensor) else norm
    return (loss * num_seqs, num_seqs) if norm is None else (loss, norm)


def step_losses(run_ctx: RunCtx, optimized_only: bool = False) -> dict[str, torch.Tensor]:
    """The normalized value of each loss of one step, on the device (``optimized_only``: not the ``as_error`` ones)."""
    return {
        name: marked.normalized().detach()
        for name, marked in run_ctx.losses.items()
        if not (optimized_only and marked.as_error)
    }


def step_values(run_ctx: RunCtx) -> dict[str, float]:
    """The normalized value of each loss of one step (syncs with the device)."""
    return {name: float(value) for name, value in step_losses(run_ctx).items()}


def format_scores(scores: dict[str, float], sep: str = " ") -> str:
    """``ce 0.699 fer 0.508`` (tiny values in scientific notation, so they do not show as 0.000)."""
    return sep.join(
        f"{name} {value:.3f}" if abs(value) >= 1e-3 or value == 0 else f"{name} {value:.3e}"
        for name, value in scores.items()
    )
