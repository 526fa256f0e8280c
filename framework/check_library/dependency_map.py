"""Which input positions each prediction depends on: a gradient dependency map for any model.

One run of ``train_step`` on a model copy (the probe session) makes the model's inputs leaves of the
graph: every float batch key, and the output of the first embedding lookup of each token key
(``F.embedding`` of the key's ids). The scores handed to the first loss are the predictions. For a few
predictions (a seeded random projection of one row each), one backward pass each gives the gradient at
every input position; its magnitude, summed over features, says how much that prediction depends on the
position. The shares are split into the prediction's own sequence (its real frames, its padding; for a
per-position prediction also its own position and the positions after it) and the other sequences.

A model whose attention mask has the opposite convention (the real tokens hidden, the padding attended)
shows as predictions that depend on the padding and hardly on the real tokens; a model whose input never
reaches the predictions shows no dependency at all.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch
import torch.nn.functional as F
from torch.overrides import TorchFunctionMode

from framework.check_library.input_information import float_spread
from framework.check_library.loss_contracts import CONTRACTS
from framework.check_library.probe import real_frames

# Predictions probed (each one backward pass).
PROBES = 6
# A share of the gradient below this is numerical noise (a masked score of -1e9 or finfo.min still leaks a little).
NOT_NEGLIGIBLE = 0.005
# The layers whose input is what the model sees of the data after the step's preprocessing.
_FIRST_LAYERS = (F.linear, F.conv1d, F.conv2d, F.conv3d)
# A loss whose first argument is the model's prediction.
_LOSSES = set(CONTRACTS) | {F.mse_loss, F.l1_loss, F.smooth_l1_loss, F.huber_loss}


@dataclass
class KeyDependency:
    """How the probed predictions depend on one input key: gradient-magnitude shares of the probes' total."""

    key: str
    per_position: bool  # whether predictions are per position (else per sequence)
    real: float = 0.0  # the own sequence's real frames
    padding: float = 0.0  # the own sequence's padding
    other: float = 0.0  # other sequences
    peak: float = 0.0  # the real frame each prediction depends on most (its own position, a [CLS] token)
    future: float = 0.0  # per-position: the own sequence's real frames after the prediction's position
    real_frames: int = 0  # real frames and padded frames of the probed sequences
    padded_frames: int = 0
    beside_peak: float = 0.0  # in the sequences with padding: their real frames besides the peak ...
    beside_frames: int = 0  # ... and how many those are
    total: float = 0.0  # the summed gradient magnitude (0: the predictions do not depend on the key)

    def reads_padding_not_input(self) -> bool:
        """Whether a padded frame weighs more than 10x a real one besides each prediction's peak frame (its own
        position, or a [CLS] token that a residual path carries whatever the mask), and the padding is not
        negligible. A masked model reads no padding; an unmasked one reads padded and real frames alike."""
        if not self.padded_frames or self.total <= 0 or self.padding < NOT_NEGLIGIBLE:
            return False
        rest = self.beside_peak / max(self.beside_frames, 1)
        return self.padding / self.padded_frames > 10 * rest


@dataclass
class DependencyMap:
    """The dependency of the probed predictions on each input key, and how the predictions were found."""

    loss: str = ""  # the loss function whose input the predictions are
    probes: int = 0
    keys: list[KeyDependency] = field(default_factory=list)
    first_layer: str = ""  # the function of the model's first layer ...
    first_input: tuple[float, float] | None = None  # ... and its input's (spread, scale) across the batch


class _Leaves(TorchFunctionMode):
    """Turns the first embedding lookup of each token key into a graph leaf; records the first loss's input."""

    def __init__(self, batch: dict[str, torch.Tensor], token_keys: list[str]):
        super().__init__()
        self.batch = batch
        self.token_keys = token_keys
        self.leaves: dict[str, tuple[torch.Tensor, bool]] = {}  # key -> (leaf, time-major)
        self.scores: torch.Tensor | None = None
        self.loss: Any = None
        self.first_layer: Any = None
        self.first_input: tuple[float, float] | None = None

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        if func in _FIRST_LAYERS and self.first_layer is None and args and isinstance(args[0], torch.Tensor):
            values = args[0].detach()
            if values.is_floating_point() and values.dim() >= 2 and values.shape[0] > 1:
                self.first_layer, self.first_input = func, float_spread(values.float().cpu().numpy())
        if func is F.embedding and isinstance(out, torch.Tensor) and out.is_floating_point():
            return self._leaf(args[0] if args else kwargs.get("input"), out)
        if func in _LOSSES and self.scores is None:
            scores = args[0] if args else kwargs.get("input", kwargs.get("log_probs"))
            if isinstance(scores, torch.Tensor) and scores.requires_grad:
                self.scores, self.loss = scores, func
        return out

    def _leaf(self, ids: Any, out: torch.Tensor) -> torch.Tensor:
        if not isinstance(ids, torch.Tensor) or ids.dim() != 2:
            return out
        for key in self.token_keys:
            values = self.batch[key]
            if key in self.leaves:
                continue
            for time_major in (False, True):
                view = ids.t() if time_major else ids
                if view.shape == values.shape and torch.equal(view, values):
                    leaf = out.detach().requires_grad_()
                    self.leaves[key] = (leaf, time_major)
                    return leaf
        return out


def _prediction_rows(scores: torch.Tensor, loss: Any, batch_size: int, real: torch.Tensor | None) -> Any:
    """[(row tensor, sequence, position or None)] for the predictions in ``scores``, or None (layout unknown)."""
    if loss in (F.cross_entropy, F.nll_loss) and scores.dim() >= 3:
        scores = scores.movedim(1, -1)
    if scores.dim() == 1:
        scores = scores.unsqueeze(-1)
    time = real.shape[1] if real is not None else None
    if scores.shape[0] == batch_size and (scores.dim() == 2 or time is None or scores.shape[1] != time):
        return [(scores[b], b, None) for b in range(batch_size)]
    if time is None:
        return None
    if scores.dim() >= 3 and scores.shape[:2] == (batch_size, time):
        return [(scores[b, t], b, t) for b, t in real.nonzero().tolist()]
    if scores.dim() >= 3 and scores.shape[:2] == (time, batch_size):
        return [(scores[t, b], b, t) for b, t in real.nonzero().tolist()]
    if scores.shape[0] == batch_size * time:
        return [(scores[b * time + t], b, t) for b, t in real.nonzero().tolist()]
    if scores.shape[0] == int(real.sum()):  # only the real frames, in order (logits[mask])
        return [(scores[i], b, t) for i, (b, t) in enumerate(real.nonzero().tolist())]
    return None


def _chosen(rows: list, real: torch.Tensor | None) -> list:
    """Up to PROBES predictions of different sequences, those of padded sequences first (their padding tells)."""
    by_seq: dict[int, Any] = {}
    for row in rows:
        b, t = row[1], row[2]
        if b not in by_seq or (t is not None and real is not None and t == int(real[b].sum()) // 2):
            by_seq[b] = row
    padded = [] if real is None else [b for b in by_seq if not bool(real[b].all())]
    order = padded + [b for b in by_seq if b not in padded]
    return [by_seq[b] for b in order[:PROBES]]


def dependency_map(
    run: Any, batch: dict[str, torch.Tensor], token_keys: list[str], float_keys: list[str]
) -> DependencyMap:
    """The dependency map of one run: ``run(batch, watch)`` runs ``train_step`` on a model copy under ``watch``
    (a context manager). Returns a ``DependencyMap`` (without keys when no prediction or input was found)."""
    batch = dict(batch)
    for key in float_keys:
        batch[key] = batch[key].detach().clone().requires_grad_()
    watch = _Leaves(batch, token_keys)
    run(batch, watch)
    found = DependencyMap(loss=getattr(watch.loss, "__name__", ""))
    found.first_layer, found.first_input = getattr(watch.first_layer, "__name__", ""), watch.first_input
    leaves = dict(watch.leaves)
    leaves.update({key: (batch[key], False) for key in float_keys})
    if watch.scores is None or not leaves:
        return found
    size = batch[next(iter(leaves))].shape[0]
    mask_key = next((k for k in token_keys + float_keys if real_frames(batch, k) is not None), None)
    real = real_frames(batch, mask_key).cpu() if mask_key else None
    rows = _prediction_rows(watch.scores, watch.loss, size, real)
    if not rows:
        return found
    probes = _chosen(rows, real)
    found.probes = len(probes)
    generator = torch.Generator().manual_seed(0)
    dependencies = {key: KeyDependency(key, per_position=probes[0][2] is not None) for key in leaves}
    names, tensors = list(leaves), [leaves[k][0] for k in leaves]
    for row, b, t in probes:
        projection = torch.randn(row.numel(), generator=generator).to(row)
        grads = torch.autograd.grad((row.reshape(-1) * projection).sum(), tensors, retain_graph=True, allow_unused=True)
        for name, grad in zip(names, grads, strict=True):
            if grad is not None:
                _add(dependencies[name], grad.movedim(1, 0) if leaves[name][1] else grad, b, t, batch, name)
    for dependency in dependencies.values():
        if dependency.total > 0:
            for part in ("real", "padding", "other", "peak", "future", "beside_peak"):
                setattr(dependency, part, getattr(dependency, part) / dependency.total)
    found.keys = list(dependencies.values())
    return found


def _add(dependency: KeyDependency, grad: torch.Tensor, b: int, t: int | None, batch: dict, key: str) -> None:
    """Add one prediction's gradient magnitudes (of sequence ``b``, position ``t``) to ``dependency``."""
    real = real_frames(batch, key)
    magnitude = grad.detach().abs().float().reshape(grad.shape[0], 1 if real is None else real.shape[1], -1)
    magnitude = magnitude.sum(-1).cpu()  # [B, T] (a fixed-shape key: [B, 1])
    total = float(magnitude.sum())
    dependency.total += total
    own = magnitude[b]
    dependency.other += total - float(own.sum())
    if real is None:
        dependency.real += float(own.sum())
        return
    mask = real[b].cpu()
    dependency.real += float(own[mask].sum())
    dependency.padding += float(own[~mask].sum())
    dependency.peak += float(own[mask].max()) if bool(mask.any()) else 0.0
    dependency.real_frames += int(mask.sum())
    dependency.padded_frames += int((~mask).sum())
    if not bool(mask.all()) and bool(mask.any()):
        dependency.beside_peak += float(own[mask].sum() - own[mask].max())
        dependency.beside_frames += int(mask.sum()) - 1
    if t is not None:
        dependency.future += float(own[t + 1 :][mask[t + 1 :]].sum())
