"""What torch's losses expect of their inputs: the contract table, and what a call's tensors actually hold.

A loss given the wrong kind of scores trains without an error: ``nll_loss`` of raw logits is unbounded,
``kl_div`` of probabilities (instead of log-probabilities) has no minimum at the target, ``ctc_loss`` of raw
logits never normalises over the labels. Each contract names the kind of scores a loss expects
(``logits``, ``log_probs`` or ``probs``), the axis its classes are on, and which of its arguments torch
accepts (or wants) on the CPU. :func:`scores_kind` reads what a tensor holds from its values;
:func:`ignored_real_labels` tells whether an ``ignore_index`` also drops a class that occurs among the
real labels.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F


@dataclass(frozen=True)
class Contract:
    """What a loss expects: the kind of its scores, their class axis (None: element-wise), CPU-side arguments."""

    scores: str  # "logits", "log_probs" or "probs"
    class_axis: int | None
    cpu_arguments: tuple[tuple[str, int], ...] = ()  # (name, position) of the arguments that may be on the CPU


CONTRACTS: dict[object, Contract] = {
    F.cross_entropy: Contract("logits", 1),
    F.nll_loss: Contract("log_probs", 1),
    F.kl_div: Contract("log_probs", -1),
    # torch's ctc_loss takes its lengths on the CPU (the cuDNN kernel requires them there).
    F.ctc_loss: Contract("log_probs", -1, (("targets", 1), ("input_lengths", 2), ("target_lengths", 3))),
    F.binary_cross_entropy: Contract("probs", None),
    F.binary_cross_entropy_with_logits: Contract("logits", None),
}

# How each kind is said in a message.
KINDS = {
    "logits": "raw scores (logits)",
    "log_probs": "log-probabilities",
    "probs": "probabilities",
}


def cpu_side(func: object, args: tuple, kwargs: dict) -> list[object]:
    """The arguments of this call of ``func`` that its contract lets live on the CPU (with any device's scores)."""
    contract = CONTRACTS.get(func)
    if contract is None:
        return []
    found = [kwargs[name] for name, _ in contract.cpu_arguments if name in kwargs]
    return found + [args[position] for _, position in contract.cpu_arguments if position < len(args)]


def scores_kind(scores: torch.Tensor, class_axis: int | None) -> str:
    """What ``scores`` hold: ``log_probs`` (<= 0, exp sums to 1 over ``class_axis``), ``probs`` (in [0, 1], summing
    to 1 over the axis; element-wise: just in [0, 1]) or ``logits`` (anything else)."""
    with torch.no_grad():
        values = scores.detach().float()
        if values.numel() == 0:
            return "logits"
        if class_axis is None or values.dim() == 0:
            return "probs" if bool(((values >= 0) & (values <= 1)).all()) else "logits"
        axis = class_axis if values.dim() > 1 else -1
        one = torch.ones((), device=values.device)
        if bool((values <= 1e-6).all()) and torch.allclose(values.exp().sum(axis), one, atol=1e-3):
            return "log_probs"
        if bool((values >= 0).all()) and torch.allclose(values.sum(axis), one, atol=1e-3):
            return "probs"
        return "logits"


def ignored_real_labels(
    target: torch.Tensor, labels: torch.Tensor, ignore_index: int, num_classes: int
) -> tuple[int, int] | None:
    """(how many of the real ``labels`` equal ``ignore_index``, how many real labels there are) when
    ``ignore_index`` is one of the ``num_classes`` class ids and the target holds it; None otherwise.

    ``labels`` are the key's labels at its real frames (no padding): a value among them is a class of the
    data, not a padding marker, and a loss that ignores it never learns that class.
    """
    if not 0 <= ignore_index < num_classes or not bool((target == ignore_index).any()):
        return None
    dropped = int((labels == ignore_index).sum())
    return (dropped, labels.numel()) if dropped else None
