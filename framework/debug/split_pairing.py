"""Do train and dev pair the same inputs with the same labels? (``debug_split_pairing``, on by default)

Drawn from one source and split at random, train and dev hold the same inputs for each class: the mean of every
input feature over the examples of one class agrees between the splits up to sampling noise, whatever the class
frequencies of each split. A pipeline that prepares the splits differently breaks that agreement, and the way it
breaks has a shape that names the difference:

- an input transform that differs (normalisation statistics, a scale, an offset): dev = a x train + b per feature, for
  every class alike, with the spread within each class scaled by the same ``|a|``;
- the features in another order (colour channels): each dev feature matches another train feature;
- the classes numbered otherwise (a label encoder fit on each split): the inputs of a class in one split are those of
  another class in the other;
- labels changed in one split only (label maps resized by interpolation, a transform that changes what an input
  shows without changing its label): part of the examples of a class look like other classes, far more often than in
  the other split.

At startup, on up to ``MAX_SEQS`` sequences of each dataset (raw arrays, as the datasets deliver them; no model), for
every dense float key and every label key that labels its sequences or its frames. A difference is counted only when
it is large (half a standard deviation within a class) and far beyond sampling noise (``MIN_Z`` standard errors, with
every sequence one sample however many frames it has). A shape that explains it is a warning; a difference that none
explains (a domain that differs by design) is a note with the numbers.
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from framework.base import log
from framework.base.config import Config
from framework.base.findings import Finding, report
from framework.base.options import register
from framework.check_library.data_checks import sample_batches, valid_values
from framework.check_library.probe import unseen
from framework.core.events import Event
from framework.core.measurements import CHANCE_LEVELS, SPLITS_ON_TRIAL
from framework.core.plugin import Plugin, on
from framework.core.state import RunState
from framework.datasets.extern_data import DataKey
from framework.debug.input_geometry import geometry_finding
from framework.debug.label_steps import label_steps_finding
from framework.debug.split_undo import (
    Undo,
    affine_undo,
    channels_last_undo,
    class_mean_undo,
    class_order_undo,
    feature_order_undo,
    measure,
)

register(
    "debug_split_pairing",
    "bool",
    True,
    "At startup: compare the inputs of each class between train and the other datasets (an input transform, a "
    "feature order, a class numbering or labels that differ between the splits).",
    __name__,
)

MAX_SEQS = 512  # sequences read from each dataset
MAX_BATCHES = 64  # ... from at most this many batches
MAX_FRAMES = 50_000  # frames kept per split for the per-frame comparison (a random subset beyond)
MIN_SEQS = 8  # sequences that must hold a class in both splits for it to be compared
MIN_EFFECT = 0.5  # a difference of means counts from this many standard deviations within the class ...
MIN_Z = 6.0  # ... and this many standard errors of the difference
EXPLAINED_Z = 5.0  # a shape explains the means when no class and feature is further off than this
SPREAD_TOLERANCE = 0.3  # an affine map must scale the spread within classes by |a| within this fraction
WIDER = 1.5  # another split whose spread within the classes is this many times train's varies more
OFF_SHARE = 0.05  # examples of a class that look like another class: this much more often than in the other split
SAME_LENGTH = 1.25  # per-sequence examples of splits whose median lengths differ more are not compared in spread
FAMILY_RATE = 1e-4  # ... beyond noise at this false-alarm rate over all its classes and both directions
MAX_FEATURES = 64  # features compared: those that tell train's classes apart best
MAX_IDS = 256  # ids of a sparse input key turned into features (train's most frequent)
MAX_VALUES = 20_000_000  # frame-feature values read per split
MAX_CLASSES = 32  # classes compared (train's most frequent)


@dataclass
class Units:
    """One split's examples of each class: per-frame (or per-sequence) feature vectors with their labels, and the
    per-sequence means of each class (the units of the noise estimate)."""

    frames: np.ndarray  # [n, F]
    labels: np.ndarray  # [n]
    seq_means: np.ndarray  # [m, F]: the mean of each class's frames within one sequence
    seq_labels: np.ndarray  # [m]
    frame_seqs: np.ndarray  # [n]: the sequence (its number in the sample) of each frame
    mean_seqs: np.ndarray  # [m]: the sequence of each of seq_means
    length: float = 1.0  # the median number of frames a per-sequence example is the mean of

    def part(self, odd: bool) -> Units:
        """The units of every other sequence (even or odd numbers): two halves with no sequence in both."""
        frames, means = self.frame_seqs % 2 == odd, self.mean_seqs % 2 == odd
        return Units(
            self.frames[frames],
            self.labels[frames],
            self.seq_means[means],
            self.seq_labels[means],
            self.frame_seqs[frames],
            self.mean_seqs[means],
            self.length,
        )


def _featurizer(key: DataKey, train_batches: list) -> tuple[Callable[[np.ndarray], np.ndarray], bool]:
    """How a sequence's values of ``key`` become [frames, features], and whether the key's values carry a feature
    axis (dense: the last axis) or are ids (sparse: the share of each of train's ``MAX_IDS`` most frequent ids)."""
    if key.sparse_dim is None:
        # the declared last axis is the feature axis; a key without a fixed one (a waveform) has one value per frame
        axis = bool(key.shape) and isinstance(key.shape[-1], int)
        width = key.shape[-1] if axis else 1
        return (lambda xs: np.asarray(xs, dtype=np.float64).reshape(-1, width)), axis
    values = valid_values(key.name, train_batches).astype(np.int64).ravel()
    counts = np.bincount(values[(values >= 0) & (values < key.sparse_dim)], minlength=key.sparse_dim)
    ids = np.argsort(-counts, kind="stable")[: min(MAX_IDS, int((counts > 0).sum()))]
    column = np.full(key.sparse_dim, -1)
    column[ids] = np.arange(len(ids))

    def one_hot(xs: np.ndarray) -> np.ndarray:
        flat = np.asarray(xs, dtype=np.int64).reshape(-1)
        cols = np.where((flat >= 0) & (flat < key.sparse_dim), column[np.clip(flat, 0, key.sparse_dim - 1)], -1)
        out = np.zeros((len(flat), len(ids)))
        out[np.flatnonzero(cols >= 0), cols[cols >= 0]] = 1.0
        return out

    return one_hot, False


def _units(
    batches: list, data: DataKey, label: DataKey, per_frame: bool, featurize: Callable, feature_axis: bool
) -> Units | None:
    """The examples of ``batches`` ([(indices, raw arrays)]) as Units, or None when the keys do not pair up."""
    frames, labels, frame_seqs, lengths = [], [], [], []
    kept = 0
    for _, raw in batches:
        x, y = raw.get(data.name), raw.get(label.name)
        if x is None or y is None:
            return None
        x_len, y_len = raw.get(data.name + ":seq_len"), raw.get(label.name + ":seq_len")
        for row in range(len(x)):
            xs = x[row] if x_len is None else x[row, : x_len[row]]
            ys = np.asarray(y[row] if y_len is None else y[row, : y_len[row]]).astype(np.int64)
            if kept > MAX_VALUES:
                break
            if per_frame:
                if (xs.shape[:-1] if feature_axis else xs.shape) != ys.shape:
                    return None  # frames that do not pair one to one (CTC targets, a downsampled label map)
                feats, ids = featurize(xs), ys.reshape(-1)
            else:
                if ys.size != 1:
                    return None
                feats = featurize(xs)
                lengths.append(len(feats))
                feats, ids = feats.mean(0, keepdims=True), ys.reshape(1)
            keep = (ids >= 0) & (ids < (label.sparse_dim or 0))
            feats, ids = feats[keep], ids[keep]
            if not len(ids):
                continue
            kept += feats.size
            frames.append(feats)
            labels.append(ids)
            frame_seqs.append(np.full(len(ids), len(frames)))
    if not frames:
        return None
    all_frames, all_labels, all_seqs = np.concatenate(frames), np.concatenate(labels), np.concatenate(frame_seqs)
    # the mean of each class's frames within each sequence, over all frames read (before the frames are thinned)
    pairs, group = np.unique(all_seqs * np.int64(label.sparse_dim or 1) + all_labels, return_inverse=True)
    order = np.argsort(group, kind="stable")
    starts = np.flatnonzero(np.r_[True, np.diff(group[order]) != 0])
    seq_means = np.add.reduceat(all_frames[order], starts, axis=0) / np.bincount(group)[:, None]
    seq_labels, mean_seqs = pairs % np.int64(label.sparse_dim or 1), pairs // np.int64(label.sparse_dim or 1)
    if len(all_labels) > MAX_FRAMES:
        pick = np.sort(np.random.default_rng(0).choice(len(all_labels), MAX_FRAMES, replace=False))
        all_frames, all_labels, all_seqs = all_frames[pick], all_labels[pick], all_seqs[pick]
    if not np.isfinite(all_frames).all():
        return None  # the data checks report non-finite values
    length = float(np.median(lengths)) if lengths else 1.0
    return Units(all_frames, all_labels, seq_means, seq_labels, all_seqs, mean_seqs, length)


def telling_features(units: Units) -> np.ndarray:
    """The (at most ``MAX_FEATURES``) features that tell train's classes apart best: the largest ratio of the spread
    of the class means to the spread within the classes. A pairing that differs between the splits shows there."""
    classes = np.unique(units.labels)
    means = np.array([units.frames[units.labels == c].mean(0) for c in classes])
    within = np.mean([units.frames[units.labels == c].var(0) for c in classes], axis=0)
    ratio = np.where(within > 0, means.var(0) / np.where(within > 0, within, 1), -1.0)
    order = np.argsort(-ratio, kind="stable")
    return np.sort(order[ratio[order] >= 0][:MAX_FEATURES])


def select(units: Units, features: np.ndarray) -> Units:
    """``units`` with only ``features``."""
    return dataclasses.replace(units, frames=units.frames[:, features], seq_means=units.seq_means[:, features])


@dataclass
class ClassStats:
    """Per compared class: the mean, the spread within the class (frames) and the standard error of the mean."""

    mean: np.ndarray  # [K, F]
    spread: np.ndarray  # [K, F]
    se: np.ndarray  # [K, F]


def _class_stats(units: Units, classes: list[int]) -> ClassStats:
    means, spreads, ses = [], [], []
    for c in classes:
        frames = units.frames[units.labels == c]
        seq = units.seq_means[units.seq_labels == c]
        means.append(seq.mean(0) if len(frames) == 0 else frames.mean(0))
        spreads.append(frames.std(0) if len(frames) > 1 else np.zeros(units.frames.shape[1]))
        ses.append(seq.std(0, ddof=1) / np.sqrt(len(seq)))
    return ClassStats(np.array(means), np.array(spreads), np.array(ses))


@dataclass
class Comparison:
    """What the two splits' class means say: the classes and features compared, the scale (spread within classes,
    pooled), the standard errors of the differences and the cells that differ."""

    classes: list[int]
    train: ClassStats
    other: ClassStats
    scale: np.ndarray  # [F]
    se: np.ndarray  # [K, F]
    differs: np.ndarray  # [K, F] bool
    train_counts: list[int]  # sequences holding each class
    other_counts: list[int]

    def z(self, predicted: np.ndarray, observed: np.ndarray) -> np.ndarray:
        return np.abs(predicted - observed) / self.se


def compare(train: Units, other: Units, sparse_dim: int) -> Comparison | None:
    """The class means of the two splits compared, or None when fewer than two classes can be compared."""
    seqs = np.bincount(train.seq_labels, minlength=sparse_dim)
    held = sorted(
        c
        for c in np.argsort(-seqs, kind="stable")[:MAX_CLASSES].tolist()
        if seqs[c] >= MIN_SEQS and (other.seq_labels == c).sum() >= MIN_SEQS
    )
    if len(held) < 2:
        return None
    t, o = _class_stats(train, held), _class_stats(other, held)
    scale = np.sqrt((t.spread**2).mean(0))
    usable = scale > 1e-8 * (1 + np.abs(t.mean).max(0))
    if not usable.any():
        return None
    # a floor: a class without spread in the sample (a constant image) is not measured to infinite precision
    se = np.maximum(np.sqrt(t.se**2 + o.se**2), 0.02 * scale)
    effect = np.abs(o.mean - t.mean) / np.where(usable, scale, np.inf)
    differs = (effect >= MIN_EFFECT) & (np.abs(o.mean - t.mean) / se >= MIN_Z) & usable
    counts = [int((train.seq_labels == c).sum()) for c in held], [int((other.seq_labels == c).sum()) for c in held]
    return Comparison(held, t, o, scale, se, differs, *counts)


def _wider_spread(comparison: Comparison) -> float | None:
    """The median ratio of the other split's spread within the classes to train's, when it is at least WIDER for
    nearly every class and feature and far beyond noise (the log of a spread has a standard error of about
    sqrt(1 / 2n)); None otherwise. Train wider than dev is augmentation in training, often intended: not judged."""
    t, o = comparison.train, comparison.other
    usable = (t.spread > 0) & (o.spread > 0)
    if not usable.any():
        return None
    ratio = np.where(usable, o.spread / np.where(usable, t.spread, 1), 1.0)
    n_t = np.array(comparison.train_counts, dtype=float)[:, None]
    n_o = np.array(comparison.other_counts, dtype=float)[:, None]
    se = np.sqrt(1 / (2 * np.maximum(n_t - 1, 1)) + 1 / (2 * np.maximum(n_o - 1, 1)))
    wide = usable & (ratio >= WIDER) & (np.log(np.maximum(ratio, 1e-12)) >= MIN_Z * se)
    if wide.sum() < 0.9 * usable.sum():
        return None
    return float(np.median(ratio[usable]))


def _affine(comparison: Comparison) -> tuple[np.ndarray, np.ndarray] | None:
    """(a, b) per feature when other = a * train + b explains every class mean and the spreads scale by |a|."""
    t, o = comparison.train, comparison.other
    k = len(comparison.classes)
    a, b = np.ones(t.mean.shape[1]), np.zeros(t.mean.shape[1])
    for f in range(t.mean.shape[1]):
        w = 1 / comparison.se[:, f] ** 2
        x, y = t.mean[:, f], o.mean[:, f]
        xm, ym = (w * x).sum() / w.sum(), (w * y).sum() / w.sum()
        var = (w * (x - xm) ** 2).sum()
        a[f] = (w * (x - xm) * (y - ym)).sum() / var if var > 0 else 1.0
        b[f] = ym - a[f] * xm
    if np.abs(a).min() < 1e-6:
        return None
    if (comparison.z(a * t.mean + b, o.mean) >= EXPLAINED_Z).any():
        return None
    moved = comparison.differs.any(0)
    ratio = np.sqrt((o.spread**2).mean(0)) / np.maximum(np.sqrt((t.spread**2).mean(0)), 1e-12)
    if (np.abs(np.abs(a[moved]) / ratio[moved] - 1) > SPREAD_TOLERANCE).any():
        return None
    if k < 3 and np.allclose(np.abs(a[moved]), 1, atol=SPREAD_TOLERANCE):
        # two classes and no change of scale: any shift of the two means is an offset, nothing discriminates it
        return None
    return a, b


def _matching(cost: np.ndarray) -> list[int] | None:
    """For each row, the column of least cost, when that makes a one-to-one matching that is not the identity."""
    best = cost.argmin(1)
    if len(set(best.tolist())) != len(best) or (best == np.arange(len(best))).all():
        return None
    return best.tolist()


def _feature_order(comparison: Comparison) -> list[int] | None:
    """For each feature of the other split, the train feature it is, when the features come in another order."""
    t, o = comparison.train.mean, comparison.other.mean
    if t.shape[1] < 2:
        return None
    cost = np.array(
        [
            [((o[:, g] - t[:, f]) ** 2 / comparison.se[:, g] ** 2).sum() for f in range(t.shape[1])]
            for g in range(t.shape[1])
        ]
    )
    order = _matching(cost)
    if order is None or (comparison.z(t[:, order], o) >= EXPLAINED_Z).any():
        return None
    return order


def _class_order(comparison: Comparison) -> list[int] | None:
    """For each compared class of the other split, the train class whose inputs it holds, when they are numbered
    otherwise."""
    t, o = comparison.train.mean, comparison.other.mean
    cost = np.array(
        [[((o[k] - t[c]) ** 2 / comparison.se[k] ** 2).sum() for c in range(len(t))] for k in range(len(o))]
    )
    order = _matching(cost)
    if order is None or (comparison.z(t[order], o) >= EXPLAINED_Z).any():
        return None
    return order


def _distances(frames: np.ndarray, centres: np.ndarray) -> np.ndarray:
    """[n, K] squared distances, without the [n, K, F] differences."""
    return np.maximum((frames**2).sum(1)[:, None] - 2 * frames @ centres.T + (centres**2).sum(1)[None], 0.0)


def _nearest(reference: Units, judged: Units, classes: list[int], scale: np.ndarray) -> dict[int, tuple]:
    """For each class of ``judged``: which class of ``reference`` each of its examples is nearest to (by the class
    means, features in units of ``scale``), and how far, next to how far ``reference``'s own examples of each class
    are from their mean (the typical distance)."""
    centres = np.array([reference.frames[reference.labels == c].mean(0) for c in classes]) / scale
    typical = np.array(
        [
            np.median(_distances(reference.frames[reference.labels == c] / scale, centres[i : i + 1]))
            for i, c in enumerate(classes)
        ]
    )
    result = {}
    for c in classes:
        distances = _distances(judged.frames[judged.labels == c] / scale, centres)
        nearest = distances.argmin(1)
        result[c] = nearest, distances[np.arange(len(nearest)), nearest] / np.maximum(typical[nearest], 1e-12)
    return result


@dataclass
class Mixed:
    """Labels of one split that disagree with their inputs more than the other split's: which split, the worst class,
    the share of its examples that look like other classes, that share among the other split's own examples, and the
    classes they look like."""

    split: str
    cls: int
    share: float
    reference_share: float
    like: list[int]
    both_sides: bool
    own: Agreement | None = None  # the mixed split's labels judged by its own other half
    reference_own: Agreement | None = None  # ... and the other split's


@dataclass
class Agreement:
    """How often the nearest class mean of half of a split's sequences gives the labels of the other half, against
    how often it would if the labels were independent of the inputs (the product of the label and prediction
    shares), over ``seqs`` judged sequences."""

    right: float
    independent: float
    seqs: int

    def noise(self, other: Agreement) -> float:
        """The standard error of the difference between this share and ``other``'s."""
        return float(
            np.hypot(
                np.sqrt(max(self.right * (1 - self.right), 0.01) / max(self.seqs, 1)),
                np.sqrt(max(other.right * (1 - other.right), 0.01) / max(other.seqs, 1)),
            )
        )

    @property
    def at_chance(self) -> bool:
        """No better than labels independent of their inputs, beyond three standard errors."""
        noise = np.sqrt(max(self.independent * (1 - self.independent), 0.01) / max(self.seqs, 1))
        return self.right <= self.independent + 3 * noise


def _own_agreement(units: Units, classes: list[int], scale: np.ndarray) -> Agreement | None:
    """The nearest class mean of one half of ``units``' sequences judged on the other half (None when a class is
    missing from a half)."""
    fit, held = units.part(False), units.part(True)
    if any((fit.labels == c).sum() == 0 for c in classes) or len(held.labels) == 0:
        return None
    centres = np.array([fit.frames[fit.labels == c].mean(0) for c in classes]) / scale
    predicted = np.asarray(classes)[_distances(held.frames / scale, centres).argmin(1)]
    shares = [(float((held.labels == c).mean()), float((predicted == c).mean())) for c in classes]
    seqs = len(np.unique(held.frame_seqs))
    return Agreement(float((predicted == held.labels).mean()), sum(a * b for a, b in shares), seqs)


def _mixed_labels(train: Units, other: Units, comparison: Comparison, option: str) -> Mixed | None:
    """The split whose examples of a class look like another class far more often than the other split's own
    examples do, and look like typical examples of that class; or None. The rule is the nearest class mean of one half
    of the other split's sequences; the other half gives its own share (means fit on one half, judged on the other, so
    the rule is no better on its own split than it would be on new data of it)."""
    classes, scale = comparison.classes, np.where(comparison.scale > 0, comparison.scale, 1.0)
    # a two-sided test of each class in both directions at a family-wise false-alarm rate of about FAMILY_RATE (the
    # Gaussian tail bound of the corrected level)
    threshold = np.sqrt(2 * np.log(2 * len(classes) / FAMILY_RATE))
    found = []
    for split, judged, reference in (("train", train, other), (option, other, train)):
        # a feature constant in the judged split (a domain flag) says nothing about how its labels are paired
        varying = np.flatnonzero(np.ptp(judged.frames, axis=0) > 1e-9 * (1 + np.abs(judged.frames).max(0)))
        if not len(varying):
            continue
        judged, kept = select(judged, varying), select(reference, varying)
        fit, held = kept.part(False), kept.part(True)
        if any((fit.labels == c).sum() == 0 or (held.labels == c).sum() == 0 for c in classes):
            continue
        across, own = _nearest(fit, judged, classes, scale[varying]), _nearest(fit, held, classes, scale[varying])
        for i, c in enumerate(classes):
            nearest, distance = across[c]
            wrong = nearest != i
            share, baseline = float(wrong.mean()), float((own[c][0] != i).mean())
            # two shares of two samples, with every sequence one sample (its frames are alike); each class is tested
            # in both directions, so the threshold grows with the number of tests
            seqs, held_seqs = int((judged.seq_labels == c).sum()), int((held.seq_labels == c).sum())
            if held_seqs < MIN_SEQS:
                continue
            pooled = (share * seqs + baseline * held_seqs) / (seqs + held_seqs)
            noise = np.sqrt(max(pooled * (1 - pooled), 0.01) * (1 / seqs + 1 / held_seqs))
            excess = share - baseline
            # typical members of the class they look like (labels that differ), not inputs unlike any class (noise)
            typical = wrong.any() and float(np.median(distance[wrong])) <= 1.5
            if excess >= OFF_SHARE and share >= 2 * baseline and excess >= threshold * noise and typical:
                counts = np.bincount(nearest[wrong], minlength=len(classes)) / len(nearest)
                like = [classes[j] for j in np.argsort(-counts) if counts[j] >= 0.2 * counts.sum()]
                both = any(k < c for k in like) and any(k > c for k in like)
                found.append((excess, Mixed(split, c, share, baseline, like, both)))
    splits = {mixed.split for _, mixed in found}
    # labels that disagree in both splits alike say nothing about one of them
    if len(splits) != 1:
        return None
    mixed = max(found, key=lambda item: item[0])[1]
    # within each split: labels that its own inputs do not predict were paired with other inputs (reordered apart);
    # labels that they predict, but as another class than the other split, were numbered or transformed otherwise
    judged, reference = (train, other) if mixed.split == "train" else (other, train)
    mixed.own = _own_agreement(judged, classes, scale)
    mixed.reference_own = _own_agreement(reference, classes, scale)
    return mixed


def _numbers(values: np.ndarray, limit: int = 4) -> str:
    return ", ".join(f"{v:.3g}" for v in values[:limit]) + (", ..." if len(values) > limit else "")


def _scale_remark(a: np.ndarray) -> str:
    """What a common scale factor of the inputs suggests, when it is one that image pipelines apply."""
    for factor, text in ((1 / 255, "divided by 255 once more"), (255.0, "not divided by 255")):
        if np.all(np.abs(np.abs(a) / factor - 1) < 0.2):
            return f" A scale of about {'1/255' if factor < 1 else '255'}: pixel values {text} in {{option}}."
    return ""


def _within_text(mixed: Mixed, reference: str) -> str:
    """What each split's own halves say of its labels: independent of the inputs in the mixed split alone (paired with
    other inputs), or consistent within it (numbered or transformed otherwise than the other split)."""
    own, theirs = mixed.own, mixed.reference_own
    if own is None or theirs is None or theirs.at_chance or theirs.right < own.right - 3 * own.noise(theirs):
        return ""  # the other split's own labels agree less with its inputs: which split differs is not decided
    rule = f"the nearest class mean of half of {mixed.split}'s own sequences"
    if own.at_chance:
        return (
            f" Within {mixed.split} too its labels are independent of its inputs: {rule} is right on {own.right:.0%} "
            f"of the other half, as often as labels independent of the inputs would be ({own.independent:.0%}), where "
            f"on {reference}'s own halves it is right on {theirs.right:.0%}: {mixed.split}'s labels belong to other "
            f"inputs than their own (inputs and labels shuffled or reordered apart, labels of another file)."
        )
    return (
        f" Within {mixed.split} its labels agree with its inputs ({rule} is right on {own.right:.0%} of the other "
        f"half; labels independent of the inputs: {own.independent:.0%}): the same inputs carry another class there "
        f"than in {reference}, consistently (another class numbering, or a transform of the inputs or labels in one "
        f"pipeline)."
    )


@dataclass
class Pairing:
    """A finding on how one split pairs inputs with labels against train, with the transform that explains it undone
    when one does (``undo``): the experiment, once the model has learned, that decides whether it hurts."""

    option: str
    finding: Finding
    undo: Undo | None = None
    if_hurts: str = ""  # what the finding adds when the experiment shows that the difference hurts


def pairing_finding(
    option: str, data: DataKey, label: DataKey, train: Units, other: Units, features: np.ndarray, feature_axis: bool
) -> Pairing | None:
    """The finding on how ``option`` pairs ``data`` with ``label`` against train, or None when they agree
    (``features``: the key's feature index of each column of the units; ``feature_axis``: whether they index the
    key's last axis)."""
    comparison = compare(train, other, label.sparse_dim or 0)
    if comparison is None:
        return None
    named = "id" if data.sparse_dim is not None else "feature"
    evidence: dict[str, Any] = {
        "classes": comparison.classes,
        "features": features[:8].tolist(),
        "train_means": comparison.train.mean[:, :8].round(4).tolist(),
        f"{option}_means": comparison.other.mean[:, :8].round(4).tolist(),
        "differing_cells": int(comparison.differs.sum()),
    }
    where = {"dataset": option, "key": data.name, "label_key": label.name}
    observed = ""
    if comparison.differs.any():
        z = np.abs(comparison.other.mean - comparison.train.mean) / comparison.se
        k, f = np.argwhere(comparison.differs)[np.argmax(z[comparison.differs])]
        t_mean, o_mean = comparison.train.mean[k, f], comparison.other.mean[k, f]
        observed = (
            f"; measured: the inputs {data.name!r} of the examples labelled {comparison.classes[k]} differ between "
            f"train and {option}: {named} {features[f]} has mean {t_mean:.4g} in train and {o_mean:.4g} in {option} "
            f"({abs(o_mean - t_mean) / comparison.scale[f]:.2g} standard deviations within the class, {z[k, f]:.0f} "
            f"standard errors); {int(comparison.differs.sum())} of {comparison.differs.size} class-{named} means differ"
        )
        found = _input_transform(comparison, option, data, label, features, feature_axis, observed)
        if found is not None:
            found.finding.evidence = evidence | found.finding.evidence
            found.finding.where = where
            return found
    # An example that is the mean of its frames varies less the more frames it has: with other lengths in the two
    # splits, the spread within a class and how often a nearest-mean rule errs differ by that alone.
    alike = max(train.length, other.length) <= SAME_LENGTH * min(train.length, other.length)
    if alike and (mixed := _mixed_labels(train, other, comparison, option)) is not None:
        reference = option if mixed.split == "train" else "train"
        evidence |= {"mixed_split": mixed.split, "class": mixed.cls, "share": round(mixed.share, 4), "like": mixed.like}
        between = (
            f" They look like classes on both sides of {mixed.cls} ({', '.join(map(str, mixed.like))}): ids averaged "
            f"between classes, as interpolating a label map or mixing labels as numbers makes."
            if mixed.both_sides
            else ""
        )
        within = _within_text(mixed, reference)
        tail = (
            f" Measured{observed.removeprefix('; measured')}."
            if within and observed
            else ""
            if within
            else " Inputs and labels paired otherwise by one split's pipeline (inputs reordered without their labels, "
            "a transform of the inputs whose labels were not changed with them, a resized or remapped label map)"
            f"{observed}."
        )
        if mixed.own is not None:
            evidence |= {
                "own_half_right": round(mixed.own.right, 4),
                "independent_right": round(mixed.own.independent, 4),
            }
        return Pairing(
            option,
            Finding(
                "warning",
                "sanity check",
                f"The labels {label.name!r} of {mixed.split} disagree with their inputs: of the {mixed.split} examples "
                f"labelled {mixed.cls}, {mixed.share:.0%} have inputs {data.name!r} nearest to what {reference} labels "
                f"{', '.join(map(str, mixed.like))} (against {mixed.reference_share:.0%} of {reference}'s own examples of "
                f"{mixed.cls}, by the same rule: the nearest of the class means of half of {reference}'s sequences, "
                f"judged on the other half), so {mixed.split} labels part "
                f"of these inputs with another class than {reference} does.{between}{within}{tail}",
                evidence=evidence,
                where=where,
                fix=f"Give {mixed.split} the pairing of {reference}: every reordering or transform of an input applied to "
                f"its label too (label maps resized with nearest-neighbour interpolation).",
            ),
        )
    if alike and (wider := _wider_spread(comparison)) is not None:
        evidence |= {"spread_ratio": round(wider, 3)}
        return Pairing(
            option,
            Finding(
                "warning",
                "sanity check",
                f"The inputs {data.name!r} vary more within each class of {label.name!r} in {option} than in train: the "
                f"spread within the classes is {wider:.3g} times train's (the median over classes and features; at "
                f"least {WIDER:g} times in 90% of them, each beyond {MIN_Z:g} standard errors). "
                f"{option.capitalize()}'s pipeline adds variation that training never showed the model (noise, the aliasing of a resize without low-pass filtering, another decoder or resampler), or train's "
                f"removes it (smoothing, filtering applied in training only){observed}.",
                evidence=evidence,
                where=where,
                fix=f"Prepare {option} with train's pipeline: the same decoder, resizing (with its antialiasing) and "
                f"filtering.",
            ),
        )
    if not comparison.differs.any():
        return None
    shift = np.where(comparison.differs, comparison.train.mean - comparison.other.mean, 0.0)
    # an id key's features are shares of its ids, not values a batch holds: nothing to move
    undo = (
        class_mean_undo(data.name, label.name, features, comparison.classes, shift, feature_axis)
        if data.sparse_dim is None
        else None
    )
    return Pairing(
        option,
        Finding(
            "note",
            "sanity check",
            f"The inputs {data.name!r} of the classes of {label.name!r} differ between train and {option}, not by one "
            f"transform of the inputs or the labels (checked: a scale and offset per {named}, another {named} order, "
            f"another class numbering, labels that disagree with their inputs in one split){observed}. A domain that "
            f"differs by design shows so; if the splits come from one source, compare their pipelines (python "
            f"tools/dump-dataset.py CONFIG --dataset {option}).",
            evidence=evidence,
            where=where,
        ),
        undo,
        # moving each example by its own class's difference uses the labels: it shows that the difference accounts
        # for the gap, not whether it is a bug of one split's preparation or a domain that differs by design
        if_hurts=f" So the gap between {option} and train is in the data the model is given, not a model that fails "
        f"to carry over what it learned. Not decided whether {option}'s inputs are prepared otherwise than train's (a "
        f"resize, crop, filter, normalisation or decoder of one split only) or come from another domain by design: "
        f"compare the pipelines (python tools/dump-dataset.py CONFIG --dataset {option} against --dataset train).",
    )


def _input_transform(
    comparison: Comparison,
    option: str,
    data: DataKey,
    label: DataKey,
    features: np.ndarray,
    feature_axis: bool,
    observed: str,
) -> Pairing | None:
    """A warning, with the transform undone, when one transform explains how the class means differ: a scale and
    offset per feature, another feature order, another class numbering; else None."""
    named = "id" if data.sparse_dim is not None else "feature"
    if data.sparse_dim is None and (affine := _affine(comparison)) is not None:
        a, b = affine
        moved = np.flatnonzero(comparison.differs.any(0))
        undo = affine_undo(data.name, features[moved], a[moved], b[moved], feature_axis)
        return Pairing(
            option,
            Finding(
                "warning",
                "sanity check",
                f"The inputs {data.name!r} in {option} are those of train scaled and shifted per feature, for every class "
                f"of {label.name!r} alike: {option} = a x train + b with a = {_numbers(a[moved])} and b = "
                f"{_numbers(b[moved])} (features {', '.join(map(str, features[moved][:4]))}{', ...' if len(moved) > 4 else ''}), "
                f"and the spread within the classes (pooled) is scaled by about the same |a|. That is what preparing the "
                f"same inputs with other constants makes (a normalisation with other statistics, another unit, a scale "
                f"or offset applied in one split only); a domain that differs by design, such as another sensor's gain, "
                f"can look the same{observed}.{_scale_remark(a[moved]).format(option=option)}",
                evidence={"scale": a[moved].round(6).tolist(), "offset": b[moved].round(6).tolist()},
                where={},
                fix=f"Prepare {option} exactly as train: the same scaling and normalisation, with the train set's statistics.",
            ),
            undo,
        )
    if (order := _feature_order(comparison)) is not None:
        pairs = ", ".join(f"{option}'s {features[g]} = train's {features[t]}" for g, t in enumerate(order) if t != g)
        # an id key's features are its most frequent ids' shares, not values the batch holds: nothing to reorder
        undo = feature_order_undo(data.name, features, order) if data.sparse_dim is None else None
        return Pairing(
            option,
            Finding(
                "warning",
                "sanity check",
                f"The {named}s of {data.name!r} come in another order in {option} than in train: for every class of "
                f"{label.name!r}, {pairs} (the class means agree after reordering, up to sampling noise). Channels or ids "
                f"swapped by one split's loader or preprocessing (a colour order, a transposed feature axis, a vocabulary "
                f"built per split){observed}.",
                evidence={"order": {str(features[g]): int(features[t]) for g, t in enumerate(order) if t != g}},
                where={},
                fix=f"Load and prepare {option} with the same channel, feature and id order as train.",
            ),
            undo,
        )
    if (classes := _class_order(comparison)) is not None:
        moved = [(comparison.classes[j], comparison.classes[i]) for j, i in enumerate(classes) if i != j]
        pairs = ", ".join(f"{option}'s {o} = train's {t}" for o, t in moved[:6])
        undo = class_order_undo(label.name, comparison.classes, classes, label.sparse_dim or 0)
        return Pairing(
            option,
            Finding(
                "warning",
                "sanity check",
                f"The classes of {label.name!r} are numbered otherwise in {option} than in train: the inputs that {option} "
                f"labels with one id are those that train labels with another ({pairs}; the class means agree after "
                f"renumbering, up to sampling noise). An id mapping built separately for each split (a label encoder or "
                f"vocabulary fit on each, another sort order of the class names){observed}.",
                evidence={"class_order": {str(o): t for o, t in moved}},
                where={},
                fix="Build the label mapping once (on train) and apply it to every split.",
            ),
            undo,
        )
    return None


def splits_differ(option: str) -> str:
    """The problem key (``evidence["problem"]``) of train and ``option`` holding different data."""
    return f"train and {option} data differ"


def sample(loader: Any) -> list:
    """Raw batches of epoch 1, [(indices, arrays)], up to MAX_SEQS sequences from at most MAX_BATCHES batches."""
    sizes = np.cumsum([len(indices) for indices in loader.plan(1)[:MAX_BATCHES]])
    return sample_batches(loader, int(np.searchsorted(sizes, MAX_SEQS) + 1))


class SplitPairing(Plugin):
    """Compares, at startup, the inputs of each class between train and every other dataset; a difference that one
    transform explains is judged once the model has learned, by undoing it (``split_undo``)."""

    bug_check = ("debug_split_pairing",)
    needs = (CHANCE_LEVELS,)  # a model still at its chance level cannot tell whether a difference hurts
    provides = (SPLITS_ON_TRIAL,)  # the differences it decides later: the startup data checks do not judge them
    # a decided difference is the record of its problem: the learning watch's vaguer dev warnings fold into it
    before = ("DevDivergenceWatch",)

    def __init__(self) -> None:
        self.pending: list[Pairing] = []  # transforms found at startup, not yet decided

    @classmethod
    def from_config(cls, config: Config, state: RunState) -> SplitPairing | None:
        return cls() if config.bool("debug_split_pairing") else None

    @on(Event.STARTUP)
    def compare_splits(self, state: RunState) -> None:
        keys = list(state.extern_data.values())
        labels = [k for k in keys if k.sparse_dim is not None and k.sparse_dim >= 2]
        inputs = [k for k in keys if k.sparse_dim is not None or np.dtype(k.dtype).kind == "f"]
        if "train" not in state.loaders or not labels or len(inputs) < 2:
            return
        try:
            with unseen():  # the global generators as they were, the user's output held (sample_batches keeps the
                # generators the datasets hold)
                samples = {option: sample(loader) for option, loader in state.loaders.items()}
            found: list[Pairing] = []
            reported: set[frozenset[str]] = set()  # two id keys pair both ways: one finding for the pair
            for label, data in itertools.product(labels, inputs):
                if data is not label and frozenset((data.name, label.name)) not in reported:
                    with np.errstate(all="ignore"):  # values near the float range: numpy's warnings are no finding
                        pairs = pairing_findings(samples, data, label)
                    found += pairs
                    reported |= {frozenset((data.name, label.name))} if pairs else set()
            steps = [f for f in (label_steps_finding(samples, label) for label in labels) if f is not None]
            steps += [f for f in (geometry_finding(samples, key) for key in inputs) if f is not None]
        except Exception as exc:  # noqa: BLE001 - data this comparison cannot read is the data checks' to report
            log.v5(f"Split comparison skipped: {type(exc).__name__}: {exc}")
            return
        for finding in steps:  # the labels or inputs alone show how a split was prepared: one record with dev's
            split = finding.where["dataset"]  # symptoms
            finding.evidence["problem"] = splits_differ(
                finding.evidence.get("against", "") if split == "train" else split
            )
            report(finding)
        # one process decides: ranks could disagree on the experiment
        decidable = state.distributed is None
        for pairing in found:
            pairing.finding.option = "debug_split_pairing = False"
            if pairing.undo is not None and decidable:
                self.pending.append(pairing)
                if pairing.finding.severity == "warning":  # a note cannot overrule the data checks' warnings
                    on_trial = state.store.get(SPLITS_ON_TRIAL) or set()
                    on_trial |= {(pairing.option, pairing.finding.where["key"])}
                    state.store.put(SPLITS_ON_TRIAL, on_trial, by=self)
            else:
                report(pairing.finding)

    @on(Event.EPOCH_END)
    def undo_differences(self, state: RunState) -> None:
        """At the end of epochs 1, 2, 4, 8, ...: a difference that undoing shows to hurt is reported as it is found."""
        if self.pending and state.epoch & (state.epoch - 1) == 0:
            self._decide(state, final=False)

    @on(Event.FINISH)
    def decide_the_rest(self, state: RunState) -> None:
        if self.pending:
            self._decide(state, final=True)

    @on(Event.CLOSE)
    def report_pending(self, state: RunState) -> None:
        """A run that ends before the experiment (an exception, Ctrl-C, a stop) still reports what startup found."""
        for pairing in self.pending:
            pairing.finding.message += " Not decided whether it hurts this model: the run ended before the experiment."
            report(pairing.finding)
        self.pending = []

    def _decide(self, state: RunState, final: bool) -> None:
        chance = state.store.get(CHANCE_LEVELS) or {}
        for pairing in list(self.pending):
            finding, undo = pairing.finding, pairing.undo
            assert undo is not None
            try:
                scores = measure(state, pairing.option, undo) if state.epoch > 0 else []
            except Exception as exc:  # noqa: BLE001 - a model that cannot be copied: the shape alone is the finding
                log.v5(f"Split comparison's experiment skipped: {type(exc).__name__}: {exc}")
                scores = []
            verdicts = {s.loss: s.verdict(getattr(chance.get(s.loss), "value", None)) for s in scores}
            hurt = [s for s in scores if verdicts[s.loss] == "hurts"]
            if not hurt and not final:
                continue
            self.pending.remove(pairing)
            if not scores:
                report(finding)  # not measured (no epoch trained, or the experiment could not run)
                continue
            shown = hurt[0] if hurt else scores[0]
            measured = f"{shown.text(pairing.option)} (epoch {state.epoch}, on a copy of the model)"
            finding.evidence |= {
                "experiment": undo.what + " undone",
                "loss": shown.loss,
                "as_prepared": shown.other,
                "undone": shown.undone,
                "train": shown.train,
            }
            if hurt:
                finding.message += (
                    f" It costs this model: with {undo.what} undone, {measured}, so undoing it closes "
                    f"{shown.closed:.0%} of the gap to train.{pairing.if_hurts}"
                )
                report(finding)
                continue
            finding.severity, finding.fix = "note", ""
            finding.evidence.pop("problem", None)  # a note is no record that a warning of the problem folds into
            if all(v == "harmless" for v in verdicts.values()):
                finding.message += (
                    f" It does not hurt this model: with {undo.what} undone, {measured}; the model does not depend on "
                    f"it (a difference by design, or one the model normalises away)."
                )
            else:
                finding.message += (
                    f" Not decided yet whether it hurts this model: with {undo.what} undone, {measured}. Next "
                    f"experiment: train longer and rerun, or prepare {pairing.option} as train is and compare its "
                    f"score."
                )
            report(finding)


def _channels_first(data: DataKey, label: DataKey) -> bool:
    """Whether ``data``'s first axis is its feature axis (channels first, as torch lays out images) and the rest is
    the shape of ``label``'s per-frame labels, where the last axis is not."""
    if data.sparse_dim is not None or len(data.shape) != len(label.shape) + 1 or not isinstance(data.shape[0], int):
        return False
    return data.shape[1:] == label.shape and data.shape[:-1] != label.shape


def _channels_last(batches: list, key: str) -> list:
    """Raw batches with ``key``'s first axis after the batch axis moved last."""
    return [(indices, raw | {key: np.moveaxis(raw[key], 1, -1)} if key in raw else raw) for indices, raw in batches]


def pairing_findings(samples: dict[str, list], data: DataKey, label: DataKey) -> list[Pairing]:
    """How each dataset of ``samples`` (option -> raw batches) pairs ``data`` with ``label``, against train."""
    per_frame = bool(label.shape) and label.shape != (1,)
    channels = per_frame and _channels_first(data, label)
    if channels:  # [C, H, W] images with [H, W] label maps: compared as [H, W, C]
        data = dataclasses.replace(data, shape=data.shape[1:] + data.shape[:1])
        samples = {option: _channels_last(batches, data.name) for option, batches in samples.items()}
    featurize, feature_axis = _featurizer(data, samples["train"])
    train = _units(samples["train"], data, label, per_frame, featurize, feature_axis)
    if train is None:
        return []
    half = train.part(False)  # the half whose means the rules below never judge
    if len(np.unique(half.labels)) < 2:
        return []
    features = telling_features(half)
    if not len(features):
        return []
    train = select(train, features)
    found = []
    for option, batches in samples.items():
        if option == "train" or not batches:
            continue
        other = _units(batches, data, label, per_frame, featurize, feature_axis)
        pairing = (
            None
            if other is None
            else pairing_finding(option, data, label, train, select(other, features), features, feature_axis)
        )
        if pairing is not None:
            if channels and pairing.undo is not None:
                pairing.undo = channels_last_undo(pairing.undo, data.name)
            if pairing.finding.severity == "warning":  # the learning watch's gap between dev and new train data
                pairing.finding.evidence["problem"] = splits_differ(option)
            found.append(pairing)
    return found


PLUGINS = (SplitPairing,)
