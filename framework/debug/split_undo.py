"""Does a difference between train and another split hurt the trained model? The experiment that decides it.

The startup comparison of the splits (``split_pairing``) can find one transform that explains how another split's
inputs or labels differ from train's: a scale and offset per feature, another feature order, another class numbering.
The same shape comes from a bug of that split's pipeline (dev normalised with its own statistics, pixels divided by
255 twice, a label encoder fit per split) and from a difference by design that the model does not care about (another
sensor's gain that a normalisation inside the model removes). Only the model tells them apart: once it has learned,
its loss on the other split's first batches, as prepared and with the transform undone (mapped back to train's
preparation), on a copy of the model evaluated as that split is. Undoing a harmful difference closes most of the gap
between that split and train's own batches evaluated the same way; undoing a harmless one changes nothing.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch

from framework.base.rng import objects_random_state_kept
from framework.check_library.probe import model_copy, unseen
from framework.core.state import RunState
from framework.core.step import run_step
from framework.datasets.loader import to_device

BATCHES = 8  # batches of each split scored (the first of its plan)
CLOSES = 0.5  # undoing the transform closes at least this share of the gap to train: it hurts
LEAVES = 0.1  # ... at most this share (or the gap is at most this share of the split's loss): it does not
LEARNED = 0.2  # the model has learned when train's loss is this share below its chance level
CONSISTENT = 0.75  # the share of batches that must score better with the transform undone, for "it hurts"
COMMON_SCALE = 0.25  # scales within this fraction of their median are one scale (applied to every feature)

Arrays = dict[str, np.ndarray]


@dataclass
class Undo:
    """How to map a batch of another split (``numpy_batch``'s arrays) back to train's preparation."""

    what: str  # what is undone, for the message: "the scale and offset of 'data'"
    apply: Callable[[Arrays], Arrays]


def _valid(arrays: Arrays, key: str, shape: tuple[int, ...]) -> np.ndarray:
    """A mask of ``shape`` (the key's array without its feature axis) true at the sequences' frames, not padding."""
    lengths = arrays.get(key + ":seq_len")
    if lengths is None or len(shape) < 2:
        return np.ones(shape, dtype=bool)
    valid = np.arange(shape[1])[None, :] < np.asarray(lengths)[:, None]
    return np.broadcast_to(valid.reshape(valid.shape + (1,) * (len(shape) - 2)), shape)


def affine_undo(key: str, features: np.ndarray, a: np.ndarray, b: np.ndarray, feature_axis: bool) -> Undo:
    """other = a x train + b for the features ``features`` of ``key`` (its last axis, or its only value): undone.

    The comparison measures the features that tell the classes apart; when their scales agree (one factor for all,
    as dividing pixels by 255 or a unit makes), the key's other features are undone with the median scale and
    offset too: left as they are, most of an image would stay on the other scale."""
    common = None
    if feature_axis and np.all(np.abs(a / np.median(a) - 1) <= COMMON_SCALE):
        common = float(np.median(a)), float(np.median(b))

    def apply(arrays: Arrays) -> Arrays:
        x = np.array(arrays[key], dtype=np.float64)
        if not feature_axis:
            x = np.where(_valid(arrays, key, x.shape), (x - b[0]) / a[0], x)
            return arrays | {key: x.astype(arrays[key].dtype)}
        valid = _valid(arrays, key, x.shape[:-1])
        scale, offset = np.full(x.shape[-1], np.nan), np.zeros(x.shape[-1])
        if common is not None:
            scale[:], offset[:] = common
        scale[features], offset[features] = a, b
        undone = ~np.isnan(scale)
        x[..., undone] = np.where(valid[..., None], (x[..., undone] - offset[undone]) / scale[undone], x[..., undone])
        return arrays | {key: x.astype(arrays[key].dtype)}

    return Undo(f"the scale and offset of {key!r}", apply)


def channels_last_undo(undo: Undo, key: str) -> Undo:
    """``undo``, found on ``key`` with its channels (the first axis after the batch) moved last, applied to the
    channels-first arrays the step is given."""

    def apply(arrays: Arrays) -> Arrays:
        moved = undo.apply(arrays | {key: np.moveaxis(np.asarray(arrays[key]), 1, -1)})
        return moved | {key: np.moveaxis(moved[key], -1, 1)}

    return Undo(undo.what, apply)


def feature_order_undo(key: str, features: np.ndarray, order: list[int]) -> Undo:
    """The other split's feature ``features[g]`` holds train's ``features[order[g]]``: put each back in its place."""

    def apply(arrays: Arrays) -> Arrays:
        x = np.array(arrays[key])
        x[..., features[order]] = arrays[key][..., features]
        return arrays | {key: x}

    return Undo(f"the feature order of {key!r}", apply)


def class_order_undo(key: str, classes: list[int], order: list[int], sparse_dim: int) -> Undo:
    """The other split's class ``classes[k]`` is train's ``classes[order[k]]``: renumber the labels of ``key``."""
    mapping = np.arange(sparse_dim)
    mapping[classes] = np.asarray(classes)[order]

    def apply(arrays: Arrays) -> Arrays:
        y = np.asarray(arrays[key])
        inside = (y >= 0) & (y < sparse_dim) & _valid(arrays, key, y.shape)
        return arrays | {key: np.where(inside, mapping[np.clip(y, 0, sparse_dim - 1)], y).astype(y.dtype)}

    return Undo(f"the class numbering of {key!r}", apply)


def class_mean_undo(
    key: str, label: str, features: np.ndarray, classes: list[int], shift: np.ndarray, feature_axis: bool
) -> Undo:
    """Each example (or frame) of class ``classes[k]`` in the other split moved by ``shift[k]`` (train's class mean
    minus the other split's, 0 where they agree) on the compared ``features`` of ``key``: what is left of a difference
    that no one transform explains. It uses the labels, so it is run only on a difference already measured, it changes
    nothing where the splits agree, and its result is a note (how much of the gap the difference accounts for), never
    the evidence of a bug."""
    table = np.zeros((max(classes) + 1, len(features)))
    table[classes] = shift

    def apply(arrays: Arrays) -> Arrays:
        x = np.array(arrays[key], dtype=np.float64)
        y = np.asarray(arrays[label]).astype(np.int64)
        y = y.reshape(len(y), -1)
        known = (y >= 0) & (y < len(table))
        offset = np.where(known[..., None], table[np.clip(y, 0, len(table) - 1)], 0.0)  # [B, 1 or T, F]
        if not feature_axis:  # one value per frame: a dense key without a feature axis has width 1
            offset = offset[..., 0]
            offset = offset.reshape((len(x),) + (1,) * (x.ndim - 1)) if offset.shape[1] == 1 else offset
            x += np.where(_valid(arrays, key, x.shape), offset, 0.0)
            return arrays | {key: x.astype(arrays[key].dtype)}
        if y.shape[1] == 1:  # one label per sequence: every frame of it moves
            offset = offset.reshape((len(x),) + (1,) * (x.ndim - 2) + (len(features),))
        elif x.shape[:-1] != y.shape:
            raise ValueError(f"{key!r} {x.shape} and its labels {label!r} {y.shape} do not pair frame by frame")
        valid = _valid(arrays, key, x.shape[:-1])[..., None]
        x[..., features] = np.where(valid, x[..., features] + offset, x[..., features])
        return arrays | {key: x.astype(arrays[key].dtype)}

    return Undo(f"the difference of the class means of {key!r} ({int((shift != 0).sum())} class-feature means)", apply)


@dataclass
class Scores:
    """One loss on the first batches: the other split as prepared and with the transform undone (per batch), and
    train's own batches; all evaluated as the other split is (eval mode, no gradient), on a copy of the model."""

    loss: str
    other: list[float]
    undone: list[float]
    train: float

    @property
    def gap(self) -> float:
        return float(np.mean(self.other)) - self.train

    @property
    def closed(self) -> float:
        """The share of the gap to train that undoing the transform closes."""
        return (float(np.mean(self.other)) - float(np.mean(self.undone))) / self.gap if self.gap > 0 else 0.0

    def verdict(self, chance: float | None) -> str:
        """ "hurts", "harmless" or "undecided": a model still near ``chance`` (the loss's level without input, where
        known) on train's batches has learned too little to tell."""
        other = float(np.mean(self.other))
        if chance is not None and self.train >= (1 - LEARNED) * chance:
            return "undecided"
        better = np.mean(np.array(self.undone) < np.array(self.other))
        if self.gap > LEAVES * abs(other) and self.closed >= CLOSES and better >= CONSISTENT:
            return "hurts"
        if self.gap <= LEAVES * abs(other) or self.closed <= LEAVES:
            return "harmless"
        return "undecided"

    def text(self, option: str) -> str:
        return (
            f"{self.loss} on {option}'s first {len(self.other)} batches is {np.mean(self.other):.4g} as prepared and "
            f"{np.mean(self.undone):.4g} with it undone (better in {np.mean(np.array(self.undone) < self.other):.0%} "
            f"of the batches), against {self.train:.4g} on train's first batches evaluated the same way"
        )


def _losses(state: RunState, model: torch.nn.Module, option: str, arrays: Arrays) -> dict[str, float]:
    batch = to_device(state.loaders[option].as_tensors(arrays), state.device)
    run_ctx = run_step(state.config, model, batch, "eval", epoch=max(state.epoch, 1), step=state.global_step)
    return {name: float(marked.normalized()) for name, marked in run_ctx.losses.items() if not marked.as_error}


def _first_batches(state: RunState, option: str) -> list[Arrays]:
    """The first batches of ``option``'s plan of this epoch (the one the loader keeps), read without moving the
    generators its dataset holds."""
    loader, epoch = state.loaders[option], max(state.epoch, 1)
    with objects_random_state_kept(loader.dataset):
        return [loader.numpy_batch(indices, epoch) for indices in loader.plan(epoch)[:BATCHES]]


def measure(state: RunState, option: str, undo: Undo) -> list[Scores]:
    """Each optimized loss on ``option``'s first batches as prepared and undone, and on train's first batches.
    Raises what reading the data, copying the model or running the step raises."""
    with unseen(), torch.no_grad():
        copy = model_copy(state.model)
        copy.eval()
        other, undone, train = [], [], []
        for arrays in _first_batches(state, option):
            other.append(_losses(state, copy, option, arrays))
            undone.append(_losses(state, copy, option, undo.apply(arrays)))
        for arrays in _first_batches(state, "train"):
            train.append(_losses(state, copy, "train", arrays))
    names = [name for name in (other[0] if other else {}) if all(name in s for s in other + undone + train)]
    return [
        Scores(
            name,
            [s[name] for s in other],
            [s[name] for s in undone],
            float(np.mean([s[name] for s in train])),
        )
        for name in names
    ]
