"""Per-frame class ids averaged as numbers in one split: bands of in-between ids at region boundaries.

Class ids are names, not quantities. A label map resized with linear interpolation (an image library's default),
or a frame label sequence resampled the same way, averages the ids at every boundary: between a region of class 1
and one of class 3 comes a band of class 2 that is not there. The model is taught those bands.

Measured on the labels alone (part of the split comparison, ``debug_split_pairing``): along every axis of a per-frame
label key, the places where the label changes across three neighbouring positions, and among them the share whose
middle id lies strictly between the two outer ones (a band). A layout of regions holds such places by chance (a thin
region of a class whose id happens to lie between its neighbours'); one split where they are several times as common
as in the other, beyond sampling noise, was prepared otherwise: its ids were averaged as numbers. Ordinal labels
that vary smoothly by design do so in every split, and are not reported.
"""

from __future__ import annotations

import numpy as np

from framework.base.findings import Finding
from framework.datasets.extern_data import DataKey

RATIO = 3.0  # one split's share of in-between ids at least this many times the other's ...
MIN_SHARE = 0.1  # ... and at least this share of its boundary places
MIN_Z = 6.0  # ... beyond this many standard errors (each sequence one sample)
MIN_PLACES = 200  # boundary places a split must have to be judged


def _between(labels: np.ndarray, sparse_dim: int) -> tuple[int, int]:
    """(boundary places, in-between places) of one sequence's per-frame labels, along each of their axes."""
    places = between = 0
    for axis in range(labels.ndim):
        if labels.shape[axis] < 3:
            continue
        a = np.take(labels, range(labels.shape[axis] - 2), axis=axis)
        m = np.take(labels, range(1, labels.shape[axis] - 1), axis=axis)
        b = np.take(labels, range(2, labels.shape[axis]), axis=axis)
        valid = (a >= 0) & (b >= 0) & (m >= 0) & (a < sparse_dim) & (b < sparse_dim) & (m < sparse_dim)
        boundary = valid & (a != b)
        places += int(boundary.sum())
        between += int((boundary & (m != a) & (m != b) & (np.minimum(a, b) < m) & (m < np.maximum(a, b))).sum())
    return places, between


def _shares(batches: list, label: DataKey) -> tuple[float, float, int, int] | None:
    """The share of in-between places of a split, its standard error over sequences, and the counts."""
    per_seq = []
    for _, raw in batches:
        y, lengths = raw.get(label.name), raw.get(label.name + ":seq_len")
        if y is None:
            return None
        for row in range(len(y)):
            labels = np.asarray(y[row] if lengths is None else y[row, : lengths[row]]).astype(np.int64)
            per_seq.append(_between(labels, label.sparse_dim or 0))
    places = np.array([p for p, _ in per_seq], dtype=np.float64)
    between = np.array([b for _, b in per_seq], dtype=np.float64)
    if places.sum() < MIN_PLACES:
        return None
    share = between.sum() / places.sum()
    # a ratio estimator over sequences: the spread of each sequence's deviation from the pooled share
    se = float(np.sqrt(((between - share * places) ** 2).sum()) / places.sum())
    return float(share), se, int(places.sum()), len(per_seq)


def label_steps_finding(samples: dict[str, list], label: DataKey) -> Finding | None:
    """A warning when one split's per-frame labels of ``label`` hold in-between ids at boundaries several times as
    often as train's (or train's as another split's); None otherwise."""
    if label.sparse_dim is None or label.sparse_dim < 3 or not label.shape or label.shape == (1,):
        return None
    train = _shares(samples.get("train", []), label)
    if train is None:
        return None
    for option, batches in samples.items():
        other = _shares(batches, label) if option != "train" and batches else None
        if other is None:
            continue
        for (split, high), (reference, low) in (
            ((option, other), ("train", train)),
            (("train", train), (option, other)),
        ):
            noise = float(np.hypot(high[1], low[1]))
            if high[0] >= MIN_SHARE and high[0] >= RATIO * low[0] and high[0] - low[0] >= MIN_Z * max(noise, 1e-12):
                return Finding(
                    "warning",
                    "sanity check",
                    f"The labels {label.name!r} of {split} hold ids between their neighbours' at region boundaries: "
                    f"where the label changes across three neighbouring positions, the middle one is an id strictly "
                    f"between the two outer ones at {high[0]:.0%} of {high[2]} such places ({high[3]} sequences), "
                    f"against {low[0]:.1%} in {reference} (a band of class 2 between classes 1 and 3). Class ids "
                    f"averaged as numbers make such bands: a label map resized or resampled with linear "
                    f"interpolation in {split}'s pipeline, where {reference}'s is not.",
                    evidence={
                        "split": split,
                        "share": round(high[0], 4),
                        "against": reference,
                        "its_share": round(low[0], 4),
                    },
                    where={"dataset": split, "key": label.name},
                    fix=f"Resize or resample {split}'s labels with nearest-neighbour interpolation (the images may "
                    f"keep a linear one).",
                    option="debug_split_pairing = False",
                )
    return None
