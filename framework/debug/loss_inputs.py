"""What the first training step hands to torch's loss functions (``debug_loss_inputs``, on by default).

Before the first step, its batch runs through ``train_step`` once more, on a copy of the model
(the probe session's run of the unchanged batch, ``framework.check_library.probe``), while a torch
function mode watches the calls; the real step then runs unwatched. The watch finds:

- probabilities where logits are expected: ``cross_entropy`` of a softmax (or log_softmax)
  output, ``binary_cross_entropy_with_logits`` of a sigmoid output, ``nll_loss`` of
  probabilities or of unnormalized scores. The producing op is found on the autograd graph
  (through views, casts and indexing), so the finding names its module and source line;
- a regression loss whose prediction and target broadcast to a bigger shape (``[B, 1]`` vs
  ``[B]`` is ``[B, B]``): named once, with both shapes, instead of torch's generic warning;
- ``backward()`` called inside ``train_step``, where the engine backpropagates the marked losses
  itself: stopped before the real step, with the line;
- the rest of the contract table (``framework.check_library.loss_contracts``): ``kl_div`` and
  ``ctc_loss`` given anything but log-probabilities, and an ``ignore_index`` that is also a class
  among the real labels of the target's key (a padding id copied from elsewhere that drops a class).
  These breaches are published (``CONTRACT_BREACHES``) for the diagnosis of a symptom later in the run;
- class weights against the frequencies of the labels they weight: weights that favour the most frequent class and
  make the weighted shares of the classes more uneven than the labels are a warning when they are the inverse
  frequencies in another class order, a note otherwise.

It also records two levels of the marked losses for other diagnostics: the chance level of a
cross-entropy over class ids (the entropy of the train labels' frequencies, the loss of a model
that ignores its input; for the learning watch), and the floor of a binary cross-entropy with
soft targets (the targets' own entropy, which no model can go below; for the verdict runs).
"""

from __future__ import annotations

import contextlib
import functools
import math
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch.overrides import TorchFunctionMode

from framework.base.config import Config
from framework.base.errors import DataError, ModelCheckError
from framework.base.findings import Finding
from framework.base.options import register
from framework.check_library import data_checks
from framework.check_library.loss_contracts import CONTRACTS, KINDS, ignored_real_labels, scores_kind
from framework.check_library.module_tracker import ModuleTracker
from framework.check_library.probe import real_frames
from framework.check_library.tensors import format_frame, user_frame
from framework.core.events import Event, Order
from framework.core.measurements import (
    CHANCE_LEVELS,
    CONTRACT_BREACHES,
    ERROR_CHANCE_LEVELS,
    IGNORED_LABELS,
    LABEL_KEYS,
    LOSS_FLOORS,
    ChanceLevel,
)
from framework.core.plugin import on
from framework.core.run_ctx import RunCtx
from framework.core.state import RunState
from framework.datasets.extern_data import VOID_LABELS
from framework.debug.first_step import SharedRunCheck
from framework.debug.sanity import report_findings
from framework.debug.target_leakage import AGREEMENT, agreement, layouts, sequence_lengths

CHECK = "loss-input check"
# A class this share of a key's real frames that a class loss over that key never scores is no accident of the batch.
UNSCORED_SHARE = 0.02
# Class weights favouring the most frequent class this many times over another, on labels this imbalanced, that make
# the weighted shares this many times as uneven as the labels, make the imbalance worse.
IMBALANCE = 2.0

register(
    "debug_loss_on_class_ids",
    "bool",
    True,
    "First step: a regression loss (mse, l1, smooth_l1, huber) whose target holds the class ids of a sparse key.",
    __name__,
)

register(
    "debug_loss_inputs",
    "bool",
    True,
    "First step: probabilities fed to a loss expecting logits, broadcasting losses, backward() inside train_step.",
    __name__,
)

# Graph nodes that pass values through unchanged (views, copies, casts, selections of entries).
_TRANSPARENT = (
    "View",
    "UnsafeView",
    "Reshape",
    "Transpose",
    "Permute",
    "Squeeze",
    "Unsqueeze",
    "Clone",
    "Select",
    "Slice",
    "Index",
    "MaskedSelect",
    "Expand",
    "ToCopy",
    "Alias",
)
_SQUASHING = {"SoftmaxBackward0": "softmax", "LogSoftmaxBackward0": "log_softmax", "SigmoidBackward0": "sigmoid"}
_ORIGIN = "framework_squashing_origin"
_REGRESSION_LOSSES = {
    F.mse_loss,
    F.l1_loss,
    F.smooth_l1_loss,
    F.huber_loss,
    F.binary_cross_entropy,
    F.soft_margin_loss,
    F.poisson_nll_loss,
}
_CLASS_LOSSES = {F.cross_entropy, F.nll_loss}
# Losses that treat their target as a number on a scale: class ids (more than two classes) have none.
_DISTANCE_LOSSES = {F.mse_loss, F.l1_loss, F.smooth_l1_loss, F.huber_loss}
_BROADCAST_WARNING = r"Using a target size .* that is different to the input size"


def _is_transparent(node: Any) -> bool:
    name = type(node).__name__
    return any(name.startswith(prefix + "Backward") for prefix in _TRANSPARENT)


def squashing_origin(t: torch.Tensor) -> tuple[str, dict[str, str]] | None:
    """(``softmax``/``log_softmax``/``sigmoid``, where it ran) if ``t`` is such an op's output, up to views."""
    node = t.grad_fn
    for _ in range(32):
        if node is None:
            return None
        kind = _SQUASHING.get(type(node).__name__)
        if kind is not None:
            return kind, node.metadata.get(_ORIGIN, {})
        if not _is_transparent(node) or not node.next_functions:
            return None
        node = node.next_functions[0][0]
    return None


@dataclass
class _ClassLossCall:
    output: torch.Tensor
    key: str | None
    plain: bool  # no class weights, label smoothing or further positional arguments
    reduction: str
    scores: torch.Tensor | None = None  # the call's input and target (detached): its classification error
    target: torch.Tensor | None = None
    ignore_index: int = -100
    weight: torch.Tensor | None = None  # the class weights given to the loss
    loss: str = ""  # the loss function and where it was called
    where: str = ""


class _FirstStepWatch(TorchFunctionMode):
    """Inspects loss-function calls, tags squashing ops with their module and line, records backward calls."""

    def __init__(
        self,
        tracker: ModuleTracker,
        batch: dict[str, torch.Tensor],
        sparse_keys: list[str],
        class_ids: dict[str, int] | None = None,
        sparse_dims: dict[str, int] | None = None,
    ):
        super().__init__()
        self.sparse_dims = sparse_dims or {}  # sparse key -> its number of classes, for the ignore_index check
        self.ignored: dict[str, tuple[int, str, str]] = {}  # sparse key -> ignore_index, loss, where (the first)
        self.blanks: dict[str, tuple[int, str, str]] = {}  # sparse key -> ctc_loss's blank, loss, where (the first)
        self.void_labels: list[str] = []  # class losses given a label they neither score nor ignore
        self.class_ids = class_ids or {}  # sparse key -> its number of classes, for the regression-on-ids check
        self.tracker = tracker
        self.batch = batch
        self.sparse_keys = sparse_keys
        self.findings: list[Finding] = []
        self.backward_calls: list[str] = []
        self.class_losses: list[_ClassLossCall] = []
        self.floors: list[tuple[torch.Tensor, float]] = []  # (loss output, its least possible value)
        self.broadcasting = False  # a loss's inputs broadcast to a bigger shape

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func is torch.Tensor.backward:
            self.backward_calls.append(format_frame(user_frame()))
        if func in _REGRESSION_LOSSES:
            self._check_broadcast(func, args, kwargs)
        if func in _DISTANCE_LOSSES and self.class_ids:
            self._check_class_ids(func, args, kwargs)
        if func in _CLASS_LOSSES:
            args, kwargs = self._check_void_labels(func, args, kwargs)
        out = func(*args, **kwargs)
        if isinstance(out, torch.Tensor) and type(out.grad_fn).__name__ in _SQUASHING:
            out.grad_fn.metadata.setdefault(
                _ORIGIN, {"module": self.tracker.current or "", "where": format_frame(user_frame())}
            )
        if func in _CLASS_LOSSES or func is F.binary_cross_entropy_with_logits:
            self._check_class_loss(func, args, kwargs, out)
        if func in (F.binary_cross_entropy, F.binary_cross_entropy_with_logits) and isinstance(out, torch.Tensor):
            self._record_floor(args, kwargs, out)
        if func in (F.kl_div, F.ctc_loss):
            self._check_log_probs(func, args, kwargs)
        if func is F.ctc_loss:
            self._note_blank(args, kwargs)
        return out

    def _check_void_labels(self, func: Any, args: tuple, kwargs: dict) -> tuple[tuple, dict]:
        """A void label (-100, -1, 255, which the data may hold) outside the scored classes that reaches a class
        loss whose ignore_index is another value: torch would index the scores with it (a device-side assert
        on a GPU). Noted for ``conclude`` to stop the run before the real first step; this watched run on the copy
        goes on with those targets set to the ignore_index."""
        target = _argument(args, kwargs, 1, "target")
        scores = _argument(args, kwargs, 0, "input")
        if not isinstance(target, torch.Tensor) or target.is_floating_point() or not isinstance(scores, torch.Tensor):
            return args, kwargs
        ignore_index = int(kwargs.get("ignore_index", -100))
        classes = scores.shape[1] if scores.dim() > 1 else scores.shape[0]
        with torch.no_grad():
            void = torch.isin(target, torch.tensor(VOID_LABELS, device=target.device))
            bad = void & ((target < 0) | (target >= classes)) & (target != ignore_index)
        if not bool(bad.any()):  # another label outside the classes: torch's own error names it (num_labels, ...)
            return args, kwargs
        value = int(target[bad].flatten()[0])
        self.void_labels.append(
            f"{func.__name__} at {format_frame(user_frame())} gets the void label {value} among its targets, but "
            f"its ignore_index is {ignore_index} and it scores {classes} classes, so torch would index the scores "
            f"with {value}. If {value} marks positions without a label, pass ignore_index={value}; otherwise fix the "
            f"labels."
        )
        replaced = target.masked_fill(bad, ignore_index)
        if len(args) > 1:
            return (args[0], replaced, *args[2:]), kwargs
        return args, {**kwargs, "target": replaced}

    def _note_blank(self, args: tuple, kwargs: dict) -> None:
        """Note the ``blank`` of a ctc_loss over a sparse key's labels: CTC reads that id as "no symbol", so the
        targets must not hold it (judged against the whole dataset in ``conclude``)."""
        targets = _argument(args, kwargs, 1, "targets")
        key = self._key_of(targets) if isinstance(targets, torch.Tensor) else None
        if key is not None and key in self.sparse_dims:
            blank = int(_argument(args, kwargs, 4, "blank") or 0)
            self.blanks.setdefault(key, (blank, F.ctc_loss.__name__, format_frame(user_frame())))

    def _check_log_probs(self, func: Any, args: tuple, kwargs: dict) -> None:
        """kl_div and ctc_loss take log-probabilities (normalised over the last axis), whatever their target."""
        contract = CONTRACTS[func]
        scores = _argument(args, kwargs, 0, "log_probs" if func is F.ctc_loss else "input")
        if not isinstance(scores, torch.Tensor) or not scores.is_floating_point():
            return
        kind = scores_kind(scores, contract.class_axis)
        if kind == contract.scores or bool((scores.detach() <= 1e-6).all()):  # log-probabilities over another axis
            return
        consequence = (
            "its minimum is not at the target distribution and the loss can go below zero: training pulls the model "
            "away from the target"
            if func is F.kl_div
            else "it does not normalise them itself, so the loss rewards making every score large instead of "
            "choosing between the labels"
        )
        self.findings.append(
            Finding(
                "warning",
                "sanity check",
                f"{func.__name__} at {format_frame(user_frame())} expects {KINDS[contract.scores]} as its input "
                f"(normalised over the last axis), but gets {KINDS[kind]}; {consequence}. Pass "
                f"log_softmax(logits, dim=-1).",
                evidence={"expects": contract.scores, "gets": kind, "shape": list(scores.shape)},
                where={"op": func.__name__, "line": format_frame(user_frame())},
                fix="Pass log_softmax(logits, dim=-1).",
            )
        )

    def _check_ignore_index(self, func: Any, where: str, target: torch.Tensor, kwargs: dict) -> None:
        """Note the ``ignore_index`` of a class loss over a sparse key's labels (judged against the labels of the
        whole dataset in ``conclude``: one batch may not hold the class)."""
        key = self._key_of(target)
        if key is not None and key in self.sparse_dims:
            self.ignored.setdefault(key, (int(kwargs.get("ignore_index", -100)), func.__name__, where))

    def _check_unscored_classes(
        self, loss: str, where: str, scores: torch.Tensor, target: torch.Tensor, ignore_index: int
    ) -> None:
        """A class of the labels' key that the loss never scores: the targets it keeps (not ``ignore_index``) come
        from a sparse key of as many classes (they hold no class that key lacks, and at least half as many entries
        as its real frames), yet a class that is at least ``UNSCORED_SHARE`` of that key's real frames is not among
        them: the step turned it into ``ignore_index`` (a pad id that is also a real token, e.g. EOS)."""
        if scores.dim() < 2:
            return
        classes = scores.shape[1]
        with torch.no_grad():
            kept = target[target != ignore_index].flatten()
            if kept.numel() == 0 or bool((kept < 0).any()) or bool((kept >= classes).any()):
                return
            kept_counts = torch.bincount(kept, minlength=classes)
            for key in self.sparse_keys:
                labels = _valid_labels(self.batch, key).to(kept.device)
                if self.sparse_dims.get(key) != classes or kept.numel() < 0.5 * labels.numel():
                    continue
                if bool((labels < 0).any()) or bool((labels >= classes).any()):
                    continue
                counts = torch.bincount(labels, minlength=classes)
                if bool(((kept_counts > 0) & (counts == 0)).any()):
                    continue  # the targets hold classes this key lacks: they do not come from it
                if not _made_from(target, self.batch, key, ignore_index):
                    continue  # another key's labels, of as many classes (an entity id beside the target entity)
                # A sequence's first frame is never the target of a next-token loss: only later frames must be scored.
                later = _later_labels(self.batch, key).to(kept.device)
                later_counts = torch.bincount(later, minlength=classes) if later.numel() else counts
                frequent = later_counts >= UNSCORED_SHARE * max(later.numel(), 1)
                missing = (frequent & (kept_counts == 0)).nonzero().flatten()
                if missing.numel() == 0:
                    return
                label = int(missing[0])
                share = float(later_counts[label]) / max(later.numel(), 1)
                self.findings.append(
                    Finding(
                        "warning",
                        "sanity check",
                        f"{loss} at {where} never scores the label {label} of {key!r}: {label} is {share:.0%} of the "
                        f"real (unpadded) {key!r} frames after each sequence's first in the first batch, but none of the {kept.numel()} targets "
                        f"the loss keeps (the others are ignore_index={ignore_index}). The model never learns to "
                        f"predict {label}. A pad id that is also a real token (the end-of-sequence id used as the pad "
                        f"id) does this when the labels are masked by value: mask them by position (from the lengths "
                        f"or the attention mask) instead.",
                        evidence={"label": label, "share_of_real_frames": share, "kept_targets": kept.numel()},
                        where={"loss": loss, "line": where, "key": key},
                        fix="Set ignore_index at the padded positions only (e.g. labels[~attention_mask] = -100).",
                    )
                )
                return

    def _record_floor(self, args: tuple, kwargs: dict, out: torch.Tensor) -> None:
        """A binary cross-entropy cannot go below the entropy of its targets (gray pixels: far above 0)."""
        target = _argument(args, kwargs, 1, "target")
        if not isinstance(target, torch.Tensor) or not target.is_floating_point() or out.dim() != 0:
            return
        with torch.no_grad():
            t = target.detach().float().clamp(0, 1)
            floor = F.binary_cross_entropy(t, t, weight=kwargs.get("weight"), reduction=kwargs.get("reduction", "mean"))
        self.floors.append((out, float(floor)))

    def _check_broadcast(self, func: Any, args: tuple, kwargs: dict) -> None:
        prediction, target = _argument(args, kwargs, 0, "input"), _argument(args, kwargs, 1, "target")
        if not isinstance(prediction, torch.Tensor) or not isinstance(target, torch.Tensor):
            return
        try:
            shape = torch.broadcast_shapes(prediction.shape, target.shape)
        except RuntimeError:
            return  # torch raises its own error
        if math.prod(shape) <= max(prediction.numel(), target.numel()):
            return
        self.broadcasting = True
        p, t, b = (list(x) for x in (prediction.shape, target.shape, shape))
        self.findings.append(
            Finding(
                "warning",
                "sanity check",
                f"{func.__name__} at {format_frame(user_frame())} compares a prediction of shape {p} with a target of "
                f"shape {t}; they broadcast to {b}, so every prediction is compared with every target and the loss "
                f"is wrong without an error. Give both the same shape (e.g. prediction.squeeze(-1), or "
                f"target.view_as(prediction)).",
                evidence={"prediction_shape": p, "target_shape": t, "broadcast_shape": b},
                where={"op": func.__name__, "line": format_frame(user_frame())},
                fix="Give prediction and target the same shape (prediction.squeeze(-1) or target.view_as(prediction)).",
            )
        )

    def _check_class_ids(self, func: Any, args: tuple, kwargs: dict) -> None:
        """A distance loss whose target holds the same values as the labels of a sparse key: class ids as numbers."""
        target = _argument(args, kwargs, 1, "target")
        if not isinstance(target, torch.Tensor) or not target.is_floating_point() or target.numel() < 2:
            return
        with torch.no_grad():
            values = target.detach().flatten()
            if not bool((values == values.round()).all()):
                return
            ids = values.long().sort().values
            key = next((k for k in self.class_ids if _same_labels(self.batch, k, ids)), None)
        if key is None:
            return
        n = self.class_ids[key]
        self.findings.append(
            Finding(
                "warning",
                "sanity check",
                f"{func.__name__} at {format_frame(user_frame())} regresses on the class ids of the sparse key {key!r} "
                f"({n} classes) as if they were numbers: its target holds the batch's {key!r} labels. Class ids have "
                f"no order or distance (a prediction of 2.5 between classes 2 and 3 means nothing), so the loss pulls "
                f"every prediction toward the mean id and the model learns another task without an error. Output {n} "
                f"logits and use cross_entropy(logits, labels); for a target that is a number, declare it without "
                f"sparse_dim. (debug_loss_on_class_ids = False turns this check off.)",
                evidence={"classes": n},
                where={"op": func.__name__, "line": format_frame(user_frame()), "key": key},
                fix=f"Output {n} logits and use cross_entropy(logits, labels), or declare the target without sparse_dim.",
                option="debug_loss_on_class_ids = False",
            )
        )

    def _check_class_loss(self, func: Any, args: tuple, kwargs: dict, out: Any) -> None:
        scores, target = _argument(args, kwargs, 0, "input"), _argument(args, kwargs, 1, "target")
        if not isinstance(scores, torch.Tensor) or not scores.is_floating_point() or scores.numel() == 0:
            return
        where = format_frame(user_frame())
        origin = squashing_origin(scores)
        name = func.__name__
        if func is F.binary_cross_entropy_with_logits:
            if origin and origin[0] == "sigmoid":
                self._squashed(name, where, origin, "sigmoid", "binary_cross_entropy (on probabilities)")
            return
        if func is F.cross_entropy and origin:
            self._squashed(name, where, origin, "log_softmax", "nll_loss (on log-probabilities)")
        elif func is F.nll_loss:
            self._check_nll_input(where, scores, origin)
        if isinstance(target, torch.Tensor) and not target.is_floating_point() and "ignore_index" in kwargs:
            self._check_ignore_index(func, where, target, kwargs)
        if isinstance(target, torch.Tensor) and not target.is_floating_point() and func is not F.nll_loss:
            self._check_unscored_classes(name, where, scores, target, int(kwargs.get("ignore_index", -100)))
        if isinstance(target, torch.Tensor) and not target.is_floating_point() and isinstance(out, torch.Tensor):
            plain = kwargs.get("weight") is None and not kwargs.get("label_smoothing") and len(args) <= 2
            reduction = kwargs.get("reduction", "mean")
            self.class_losses.append(
                _ClassLossCall(
                    out,
                    self._key_of(target),
                    plain,
                    reduction,
                    scores.detach(),
                    target.detach(),
                    int(kwargs.get("ignore_index", -100)),
                    _class_weight(kwargs.get("weight", args[2] if len(args) > 2 else None)),
                    name,
                    where,
                )
            )

    def _squashed(self, loss: str, where: str, origin: tuple, applies: str, instead: str) -> None:
        kind, tag = origin
        made = f"{kind}" + (f" in module '{tag['module']}'" if tag.get("module") else "")
        made += f" at {tag['where']}" if tag.get("where") else ""
        if kind == "log_softmax":
            consequence = (
                "the loss happens to be the same (log_softmax of log-probabilities changes nothing), but the model's "
                "output is not the logits that every other use of it will assume"
            )
        else:
            consequence = (
                f"the scores are squashed twice ({kind}, then {applies}): gradients shrink and the loss cannot get "
                f"near its minimum"
            )
        self.findings.append(
            Finding(
                "warning",
                "sanity check",
                f"{loss} at {where} expects logits, but its input is the output of {made}; {loss} applies "
                f"{applies} itself, so {consequence}. Feed the scores from before the {kind} (apply {kind} only for "
                f"predictions), or use {instead}.",
                evidence={"input_made_by": made, "applies": applies},
                where={"op": loss, "line": where},
                fix=f"Feed the scores from before the {kind} (apply {kind} only for predictions), or use {instead}.",
            )
        )

    def _check_nll_input(self, where: str, scores: torch.Tensor, origin: tuple | None) -> None:
        if origin and origin[0] == "log_softmax":
            return
        with torch.no_grad():
            values = scores.detach().float()
            classes = values.movedim(1, -1) if values.dim() > 1 else values.unsqueeze(0)
            is_log_probs = bool((values <= 1e-6).all()) and bool(
                torch.allclose(classes.exp().sum(-1), torch.ones((), device=values.device), atol=1e-3)
            )
        if is_log_probs:
            return
        what = "probabilities (the output of softmax)" if origin and origin[0] == "softmax" else "scores whose exp"
        what += "" if origin and origin[0] == "softmax" else " does not sum to 1 over the classes (raw logits?)"
        self.findings.append(
            Finding(
                "warning",
                "sanity check",
                f"nll_loss at {where} expects log-probabilities, but gets {what}. nll_loss only picks the target's "
                f"entry and does not normalize, so the loss is unbounded or meaningless. Use cross_entropy on the "
                f"logits, or nll_loss(log_softmax(logits)).",
                evidence={"made_by": origin[0] if origin else None, "shape": list(scores.shape)},
                where={"op": "nll_loss", "line": where},
                fix="Use cross_entropy on the logits, or nll_loss(log_softmax(logits)).",
            )
        )

    def _key_of(self, target: torch.Tensor) -> str | None:
        """The batch key whose class ids ``target`` holds (the same memory, or the same labels without padding)."""
        storage = target.untyped_storage().data_ptr()
        for key in self.sparse_keys:
            if self.batch[key].untyped_storage().data_ptr() == storage:
                return key
        for key in self.sparse_keys:
            labels = _valid_labels(self.batch, key)
            if labels.numel() == target.numel() and torch.equal(labels.sort().values, target.flatten().sort().values):
                return key
        return None


def _later_labels(batch: dict[str, torch.Tensor], key: str) -> torch.Tensor:
    """The labels of ``key`` at its real frames after each sequence's first (all of them for a key without time)."""
    values = batch[key]
    if values.dim() < 2:
        return values.flatten()
    real = real_frames(batch, key)
    later = torch.ones(values.shape[:2], dtype=torch.bool, device=values.device) if real is None else real.clone()
    later[:, 0] = False
    return values[later].flatten()


def _argument(args: tuple, kwargs: dict, position: int, name: str) -> Any:
    return args[position] if len(args) > position else kwargs.get(name)


def _same_labels(batch: dict[str, torch.Tensor], key: str, ids: torch.Tensor) -> bool:
    """Whether the sorted ``ids`` are the labels of ``key`` (with or without its padding)."""
    for labels in (_valid_labels(batch, key), batch[key].flatten()):
        if labels.numel() == ids.numel() and torch.equal(labels.sort().values.to(ids.device), ids):
            return True
    return False


def _valid_labels(batch: dict[str, torch.Tensor], key: str) -> torch.Tensor:
    real = real_frames(batch, key)
    return batch[key].flatten() if real is None else batch[key][real].flatten()


def _reaches(loss: torch.Tensor, output: torch.Tensor) -> bool:
    """Whether ``loss`` is ``output``, up to views and a scale."""
    if loss is output:
        return True
    node, target = loss.grad_fn, output.grad_fn
    for _ in range(4):
        if node is None or target is None:
            return False
        if node is target:
            return True
        if not (_is_transparent(node) or type(node).__name__ in ("MulBackward0", "DivBackward0")):
            return False
        node = node.next_functions[0][0]
    return False


def _labels_equal_to(state: RunState, key: str, index: int) -> tuple[int, int, str] | None:
    """(how many real labels of ``key`` are ``index``, how many there are, of what) when some are: the first batch,
    else the train data (all of it when in memory, else a sample)."""
    labels = _valid_labels(state.batch, key)
    found = ignored_real_labels(labels, labels, index, state.extern_data[key].sparse_dim)
    if found is not None:
        return (*found, "the first batch")
    loader = state.loaders.get("train")
    if loader is None or not 0 <= index < state.extern_data[key].sparse_dim:
        return None
    classes, what = data_checks.class_counts(
        loader.dataset, state.extern_data[key], data_checks.sample_batches(loader, 4)
    )
    return (int(classes[index]), int(classes.sum()), what) if classes[index] > 0 else None


def _ignored_class(loss: str, where: str, key: str, index: int, count: int, total: int, what: str) -> str:
    return (
        f"{loss} at {where} ignores the label {index} (ignore_index={index}), but {index} is a class of {key!r}: "
        f"{count} of the {total} real (unpadded) {key!r} labels ({what}) are {index}. The loss never sees that class, "
        f"so the model never learns to predict it (its loss still falls). If {index} was meant to mark padding, mask "
        f"the padded frames with -100 (torch's default ignore_index) or select the real frames."
    )


def _blank_symbol(loss: str, where: str, key: str, blank: int, count: int, total: int, what: str) -> str:
    return (
        f"{loss} at {where} uses blank={blank}, but {blank} is also a symbol of its targets {key!r}: {count} of the "
        f"{total} real {key!r} labels ({what}) are {blank}. CTC reads the blank as 'no symbol' between symbols, so it "
        f"cannot learn to emit symbol {blank}, and the output index a decoder takes for the blank is trained as a "
        f"symbol. Pass blank=<the blank's index> (the index the decoder uses) to the CTC loss, or keep the blank at "
        f"index {blank} and the symbols elsewhere."
    )


def _reserved_labels(state: RunState, reserved: dict[str, tuple[int, str, str]], message: Any) -> list[Finding]:
    """An id a loss reserves for itself (an ``ignore_index``: never learned; ctc_loss's ``blank``: never emitted)
    that is also a label of the key's real frames (counted over the train data), one finding per key."""
    findings = []
    for key, (index, loss, where) in reserved.items():
        found = _labels_equal_to(state, key, index)
        if found is not None:
            count, total, what = found
            fix = (
                f"Pass blank=<the blank's index> to the CTC loss, or keep the blank at {index} and the symbols elsewhere."
                if message is _blank_symbol
                else "Mark padded frames with -100 (torch's default ignore_index), or select the real frames."
            )
            findings.append(
                Finding(
                    "warning",
                    "sanity check",
                    message(loss, where, key, index, *found),
                    evidence={"reserved": index, "labels_equal": count, "labels": total, "counted_over": what},
                    where={"op": loss, "line": where, "key": key},
                    fix=fix,
                )
            )
    return findings


def label_entropy(counts: np.ndarray) -> float:
    """The entropy (nats) of the label frequencies: the cross-entropy of always predicting them."""
    p = counts[counts > 0] / counts.sum()
    return float(-(p * np.log(p)).sum())


class LossInputsCheck(SharedRunCheck):
    """Runs the first batch's step once, watched, before the real first step (which runs unwatched)."""

    bug_check = ("debug_loss_inputs", "debug_loss_on_class_ids")

    provides = (CHANCE_LEVELS, ERROR_CHANCE_LEVELS, LOSS_FLOORS, CONTRACT_BREACHES, LABEL_KEYS, IGNORED_LABELS)
    check = CHECK

    @classmethod
    def from_config(cls, config: Config, state: RunState) -> LossInputsCheck | None:
        return cls(config.bool("debug_loss_on_class_ids")) if config.bool("debug_loss_inputs") else None

    def __init__(self, class_ids: bool = True) -> None:
        self.class_ids = class_ids

    @on(Event.STEP_START, Order.CHECK - 1, once=True)
    def judge_shared_run(self, state: RunState) -> None:
        """The first check to ask for the shared run makes it: this one (before the other checks' judgements), so
        that the session's summary and an error raised in that run name the check whose contracts it is for."""
        super().judge_shared_run(state)

    @contextlib.contextmanager
    def observe(self, state: RunState, model: torch.nn.Module) -> Iterator[_FirstStepWatch]:
        sparse = [k for k, key in state.extern_data.items() if key.sparse_dim is not None and k in state.batch]
        ids = {k: state.extern_data[k].sparse_dim for k in sparse if state.extern_data[k].sparse_dim > 2}
        tracker = ModuleTracker(model)
        dims = {k: state.extern_data[k].sparse_dim for k in sparse}
        watch = _FirstStepWatch(tracker, state.batch, sparse, ids if self.class_ids else None, dims)
        with tracker, watch:
            yield watch

    def conclude(self, state: RunState, watch: _FirstStepWatch, run_ctx: RunCtx | None) -> None:
        if watch.broadcasting:
            warnings.filterwarnings("ignore", message=_BROADCAST_WARNING)  # the finding replaces torch's warning
        if watch.void_labels:
            raise DataError(watch.void_labels[0])
        watch.findings += _reserved_labels(state, watch.ignored, _ignored_class)
        watch.findings += _reserved_labels(state, watch.blanks, _blank_symbol)
        counts = _label_counts(state)
        watch.findings += _weights_favouring_frequent_classes(watch.class_losses, counts)
        report_findings(state, "first step", watch.findings, ModelCheckError, False, off="debug_loss_inputs = False")
        state.store.put(CONTRACT_BREACHES, [f.message for f in watch.findings if f.severity == "warning"], by=self)
        state.store.put(LABEL_KEYS, sorted({c.key for c in watch.class_losses if c.key}), by=self)
        state.store.put(IGNORED_LABELS, {key: index for key, (index, _, _) in watch.ignored.items()}, by=self)
        state.store.put(CHANCE_LEVELS, self._chance_levels(state, run_ctx, watch.class_losses, counts), by=self)
        levels = _error_chance_levels(state, run_ctx, watch.class_losses, counts)
        state.store.put(ERROR_CHANCE_LEVELS, levels, by=self)
        state.store.put(LOSS_FLOORS, self._floors(run_ctx, watch.floors), by=self)
        if watch.backward_calls:
            raise ModelCheckError(
                f"train_step calls backward() itself (at {watch.backward_calls[0]}). The engine backpropagates the "
                f"sum of the losses marked with run_ctx.mark_as_loss after train_step returns, so this is a second "
                f"backward through the same graph: torch fails with 'Trying to backward through the graph a second "
                f"time', or, with retain_graph=True, every gradient counts twice. Remove the backward() call (and any "
                f"optimizer.step() / zero_grad() in train_step); mark the loss and the engine does the update."
            )

    @staticmethod
    def _chance_levels(
        state: RunState, run_ctx: RunCtx, calls: list[_ClassLossCall], counts_of: LabelCounts
    ) -> dict[str, ChanceLevel]:
        levels: dict[str, ChanceLevel] = {}
        for name, marked in run_ctx.losses.items():
            call = next((c for c in calls if c.key and c.plain and _reaches(marked.loss, c.output)), None)
            if marked.as_error or call is None:
                continue
            per_label = call.reduction == "mean" and marked.custom_inv_norm_factor is None
            per_label = per_label or (call.reduction == "sum" and marked.custom_inv_norm_factor is not None)
            if not per_label:
                continue
            counts, what = counts_of(call.key)
            if counts is not None and counts.sum() > 0:
                levels[name] = ChanceLevel(
                    label_entropy(counts), f"the entropy of the frequencies of the {call.key!r} labels ({what})"
                )
        return levels

    @staticmethod
    def _floors(run_ctx: RunCtx, floors: list[tuple[torch.Tensor, float]]) -> dict[str, float]:
        floors_by_loss: dict[str, float] = {}
        for name, marked in run_ctx.losses.items():
            floor = next((f for out, f in floors if marked.loss is out), None)
            if floor is None or marked.as_error:
                continue
            norm = marked.custom_inv_norm_factor
            floors_by_loss[name] = floor / float(norm) if norm is not None else floor
        return floors_by_loss


LabelCounts = Callable[[str], tuple[np.ndarray | None, str]]


def _label_counts(state: RunState) -> LabelCounts:
    """Per class-id key, its class counts over the first train batches (``data_checks.class_counts``), counted once
    for the chance levels of the losses and of the error scores; (None, "") without a train dataset."""
    loader = state.loaders.get("train")

    @functools.cache
    def counts_of(key: str) -> tuple[np.ndarray | None, str]:
        if loader is None:
            return None, ""
        return data_checks.class_counts(loader.dataset, state.extern_data[key], data_checks.sample_batches(loader, 4))

    return counts_of


def _class_weight(weight: Any) -> torch.Tensor | None:
    if not isinstance(weight, torch.Tensor) or weight.dim() != 1 or not weight.is_floating_point():
        return None
    return weight.detach().float().cpu()


def _weights_favouring_frequent_classes(calls: list[_ClassLossCall], counts_of: LabelCounts) -> list[Finding]:
    """Class weights against the frequencies of the labels they weight (over the classes that occur and are not
    weighted 0). Weights meant against an imbalance fall with the frequency (inverse frequency, its square root,
    median-frequency balancing, a down-weighted background) and make the weighted shares of the classes more even.
    Weights that favour the most frequent class (at least ``IMBALANCE`` times the weight of another class) on labels
    at least ``IMBALANCE`` times imbalanced, so that the weighted shares are at least ``IMBALANCE`` times as uneven
    as the labels, make the imbalance worse: a warning when they are the inverse frequencies in another class order
    (a list written in the wrong order), a note otherwise (a rare class down-weighted on purpose does this too).
    One finding per key."""
    findings: list[Finding] = []
    for call in calls:
        if call.weight is None or call.key is None or any(f.where.get("key") == call.key for f in findings):
            continue
        counts, what = counts_of(call.key)
        if counts is None or len(counts) != len(call.weight):
            continue
        weight = call.weight.numpy().astype(np.float64)
        used = (counts > 0) & (weight > 0)
        if used.sum() < 2:
            continue
        shares, w = counts[used] / counts[used].sum(), weight[used]
        weighted = shares * w / (shares * w).sum()
        frequent = int(np.argmax(shares))
        imbalance = shares.max() / shares.min()
        if imbalance < IMBALANCE or w[frequent] < IMBALANCE * w.min():
            continue
        if weighted.max() / weighted.min() < IMBALANCE * imbalance:
            continue
        ids = np.flatnonzero(used)
        inverse = 1 / shares
        reordered = np.allclose(np.sort(w / w.sum()), np.sort(inverse / inverse.sum()), rtol=0.2)
        if reordered:
            judged = (
                "They are the inverse frequencies of the classes in another order: the list is not in class-id order."
            )
        else:
            judged = "If a class is down-weighted on purpose, this is intended."
        least = int(np.argmin(w))
        f_id, l_id = int(ids[frequent]), int(ids[least])
        findings.append(
            Finding(
                "warning" if reordered else "note",
                "sanity check",
                f"The class weights of {call.loss} at {call.where} favour the most frequent of the {call.key!r} labels "
                f"({what}): class {f_id}, {shares[frequent]:.0%} of the labels, has weight {w[frequent]:.3g}; class "
                f"{l_id}, {shares[least]:.0%}, has {w[least]:.3g}. Weighted, the classes' shares of the loss are "
                f"{weighted.max() / weighted.min():.3g} times as uneven as the labels' ({imbalance:.3g}): the weights "
                f"make the imbalance worse instead of countering it. {judged} Weights against an imbalance fall with "
                f"the frequency (1 / share, in class-id order: {_rounded(inverse / inverse.min())}).",
                evidence={
                    "classes": ids.tolist(),
                    "shares": [round(float(x), 4) for x in shares],
                    "weights": [float(x) for x in w],
                    "weighted_shares": [round(float(x), 4) for x in weighted],
                    "counted_over": what,
                },
                where={"op": call.loss, "line": call.where, "key": call.key},
                fix="Give each class the weight of the inverse of its own frequency, in class-id order.",
            )
        )
    return findings


def _rounded(values: np.ndarray) -> str:
    return "[" + ", ".join(f"{v:.3g}" for v in values) + "]"


def _error_chance_levels(
    state: RunState, run_ctx: RunCtx | None, calls: list[_ClassLossCall], counts_of: LabelCounts
) -> dict[str, ChanceLevel]:
    """The chance level of each error score that is the classification error of a class loss of the first step:
    two paths that must agree (the score's value, and the share of that loss's arg-max predictions that miss its
    labels, ignored ones left out); its level is the error of always predicting the most frequent label."""
    levels: dict[str, ChanceLevel] = {}
    if run_ctx is None:
        return levels
    errors = {}
    for call in calls:
        if call.key is None or call.scores is None or call.target is None or call.scores.dim() < 1:
            continue
        predicted = call.scores.argmax(dim=1 if call.scores.dim() >= 2 else 0)
        if predicted.shape != call.target.shape:
            continue
        scored = call.target != call.ignore_index
        if scored.any():
            errors[call.key] = float((predicted != call.target)[scored].float().mean())
    if not errors:
        return levels
    for name, marked in run_ctx.losses.items():
        if not marked.as_error:
            continue
        value = float(marked.normalized().detach())
        key = next((k for k, error in errors.items() if abs(error - value) <= 1e-6), None)
        if key is None:
            continue
        counts, what = counts_of(key)
        if counts is not None and counts.sum() > 0:
            levels[name] = ChanceLevel(
                1 - float(counts.max() / counts.sum()),
                f"the error of always predicting the most frequent {key!r} label ({what})",
            )
    return levels


def _made_from(target: torch.Tensor, batch: dict[str, torch.Tensor], key: str, ignore_index: int) -> bool:
    """Whether the targets the loss keeps are ``key``'s values where they sit (at the same position or a neighbour's,
    in the usual layouts): labels made from that key, some of them turned into ``ignore_index``. A key that merely
    has as many classes holds other values there."""
    flat = target.detach().reshape(-1).cpu().clone()
    flat[flat == ignore_index] = -1
    values = batch[key].detach().cpu()
    if values.dim() == 1:
        kept = flat >= 0
        return (
            flat.numel() == values.numel()
            and bool(kept.any())
            and bool((flat[kept] == values[kept]).float().mean() >= AGREEMENT)
        )
    lengths = sequence_lengths(batch, key)
    for seqs, positions in layouts(flat.numel(), values.shape[0], lengths):
        for offset in (0, 1, -1):
            agreed = agreement(flat, values, lengths, seqs, positions + offset)
            if agreed is not None and agreed >= AGREEMENT:
                return True
    return False


PLUGINS = (LossInputsCheck,)
