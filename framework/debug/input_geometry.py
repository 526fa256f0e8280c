"""Inputs resampled along one axis in one split only: an aspect ratio changed by one pipeline.

An evaluation transform that resizes every image to a fixed square squashes what training saw cropped; a spectrogram
computed at another hop length stretches time against frequency. The content is the same, the geometry is not, and
the model meets shapes it was not trained on.

Measured on the inputs alone (part of the split comparison, ``debug_split_pairing``): for each example of a dense key
with two or more spatial axes of fixed size, how much neighbouring values differ along each axis (the mean squared
difference, over the example's variance), and the log of the ratio between two axes: the example's anisotropy. Random
crops, flips and noise leave it alike in both splits; a resampling along one axis, with the smoothing a resize
brings, changes it. A split whose mean anisotropy differs from train's by ``RATIO`` or more, beyond ``MIN_Z``
standard errors, is reported with the axis.
"""

from __future__ import annotations

import itertools

import numpy as np

from framework.base.findings import Finding
from framework.datasets.extern_data import DataKey

RATIO = 1.15  # neighbours along one axis differ this many times more (or less) relative to another than in train (a
# 4:3 squash of noisy 12x16 images changes it by about 1.2; crops, flips and noise leave it within a few percent)
MIN_Z = 6.0  # ... beyond this many standard errors (each example one sample)
MIN_EXAMPLES = 50
MIN_SIDE = 4  # an axis with fewer positions is no spatial axis (channels)


def _spatial_axes(key: DataKey) -> list[int]:
    """The axes of ``key``'s examples that hold positions: fixed sizes of at least MIN_SIDE; with three axes, the
    smallest of the first and last is the channels."""
    axes = [i for i, n in enumerate(key.shape) if isinstance(n, int) and n >= MIN_SIDE]
    if len(key.shape) == 3 and len(axes) == 3:
        channels = 0 if key.shape[0] <= key.shape[-1] else 2
        axes.remove(channels)
    return axes if len(axes) >= 2 else []


def _anisotropy(batches: list, key: DataKey, axes: list[int]) -> dict[tuple[int, int], np.ndarray] | None:
    """Per pair of spatial axes: each example's log ratio of its neighbour differences along them."""
    per_pair: dict[tuple[int, int], list[float]] = {pair: [] for pair in itertools.combinations(axes, 2)}
    for _, raw in batches:
        x = raw.get(key.name)
        if x is None or raw.get(key.name + ":seq_len") is not None:
            return None
        x = np.asarray(x, dtype=np.float64)
        if x.ndim != len(key.shape) + 1:
            return None
        spread = x.reshape(len(x), -1).var(1)
        rough = {a: (np.diff(x, axis=a + 1) ** 2).reshape(len(x), -1).mean(1) / np.maximum(spread, 1e-12) for a in axes}
        for a, b in per_pair:
            usable = (rough[a] > 0) & (rough[b] > 0) & (spread > 0)
            per_pair[(a, b)] += np.log(rough[a][usable] / rough[b][usable]).tolist()
    return {pair: np.asarray(values) for pair, values in per_pair.items()}


def geometry_finding(samples: dict[str, list], key: DataKey) -> Finding | None:
    """A warning when another split's examples of ``key`` are resampled along one axis against train's."""
    if key.sparse_dim is not None or not (axes := _spatial_axes(key)):
        return None
    train = _anisotropy(samples.get("train", []), key, axes)
    if train is None:
        return None
    for option, batches in samples.items():
        other = _anisotropy(batches, key, axes) if option != "train" and batches else None
        if other is None:
            continue
        for (a, b), theirs in other.items():
            ours = train[(a, b)]
            if min(len(ours), len(theirs)) < MIN_EXAMPLES:
                continue
            shift = float(theirs.mean() - ours.mean())
            noise = float(np.hypot(ours.std() / np.sqrt(len(ours)), theirs.std() / np.sqrt(len(theirs))))
            if abs(shift) < np.log(RATIO) or abs(shift) < MIN_Z * max(noise, 1e-12):
                continue
            smoother, rougher = (a, b) if shift < 0 else (b, a)
            factor = float(np.exp(abs(shift)))
            return Finding(
                "warning",
                "sanity check",
                f"The inputs {key.name!r} of {option} are resampled along one axis against train's: relative to "
                f"axis {rougher + 1}, neighbouring values along axis {smoother + 1} differ {factor:.2g} times less "
                f"in {option} than in train (the mean over {len(theirs)} and {len(ours)} examples, {abs(shift) / noise:.0f} "
                f"standard errors), as a resize that changes the aspect ratio makes (squashing or stretching one "
                f"axis, with the smoothing of its interpolation); crops, flips and noise leave this ratio alike. "
                f"{option.capitalize()}'s pipeline changes the geometry that training showed the model.",
                evidence={
                    "axes": [smoother + 1, rougher + 1],
                    "factor": round(factor, 3),
                    "z": round(abs(shift) / noise, 1),
                },
                where={"dataset": option, "key": key.name},
                fix=f"Prepare {option} with train's geometry: keep the aspect ratio (resize the shorter side, then crop) "
                f"as training's transform does.",
                option="debug_split_pairing = False",
            )
    return None
