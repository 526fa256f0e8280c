"""Checks of the data before training: dtypes, labels, NaN/Inf, value ranges, constant features, class balance.

They look at the raw arrays of the first batches of each dataset (numpy, no model, no device),
and at the complete labels and sequence lengths of in-memory datasets. Each finding names the dataset, key, class
or feature and says what to check; ``severe`` ones (the data cannot be trained on as it is)
stop training.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from framework.base.findings import Finding
from framework.base.rng import objects_random_state_kept
from framework.datasets.extern_data import DataKey, bad_labels, label_error
from framework.datasets.numpy_dataset import Ragged

# A dense key whose mean or std is beyond this is far from normalized.
UNNORMALIZED = 10.0
# A class this much more (or less) frequent in one split than in the other is reported.
FREQUENCY_RATIO = 3.0
# A class missing from a split is reported when the split should hold this many of it by train's frequency.
MIN_EXPECTED_COUNT = 5.0
# Per-feature value ranges that differ by more than this factor are on different scales.
SCALE_SPREAD = 1e3
# The train labels' spread (nats) below which their order is not judged (one class dominates), and the share of it
# a batch's own label entropy must reach under random order.
ORDER_MIN_ENTROPY = 0.5
ORDER_SHARE = 0.25


class Sample(list):
    """Sampled batches, ``[(sequence indices, raw arrays)]``, that know their ``dataset``: a check can ask it
    what it knows of all its sequences without reading them (their lengths)."""

    def __init__(self, batches: list[tuple[np.ndarray, dict[str, np.ndarray]]], dataset: Any = None):
        super().__init__(batches)
        self.dataset = dataset


def sample_batches(loader: Any, num_batches: int) -> Sample:
    """The raw arrays of the first ``num_batches`` batches of epoch 1 (as the dataset delivers them). A dataset that
    draws from a generator of its own (augmentation in ``get_batch``) draws the same afterwards as without the read:
    the run trains on what it would have without the checks."""
    with objects_random_state_kept(loader.dataset):
        batches = [(indices, loader.dataset.get_batch(indices)) for indices in loader.plan(1)[:num_batches]]
    return Sample(batches, loader.dataset)


def key_lengths(dataset: Any, key: str) -> np.ndarray | None:
    """The length of ``key`` in every sequence of ``dataset``, where known without reading the data: a
    dataset's ``key_lengths(key)``, or the arrays of a ``NumpyDataset`` (lists of arrays, ``Ragged``); else None."""
    if hasattr(dataset, "key_lengths"):
        return np.asarray(dataset.key_lengths(key), dtype=np.int64)
    value = (getattr(dataset, "arrays", None) or {}).get(key)
    if isinstance(value, Ragged):
        return value.lengths
    if isinstance(value, list):
        return np.array([np.shape(a)[0] if np.ndim(a) else 1 for a in value], dtype=np.int64)
    return None


def valid_values(key: str, batches: list[tuple[np.ndarray, dict[str, np.ndarray]]]) -> np.ndarray:
    """The values of ``key`` without padding: [entries or frames, *feature shape]."""
    parts = []
    for _, raw in batches:
        array, lengths = raw[key], raw.get(key + ":seq_len")
        if lengths is None:
            parts.append(array)
        else:
            parts.extend(array[row, :length] for row, length in enumerate(lengths))
    return np.concatenate(parts) if parts else np.zeros((0,))


def key_findings(
    option: str, dataset_name: str, key: DataKey, batches: list[tuple[np.ndarray, dict[str, np.ndarray]]]
) -> list[Finding]:
    """Dtype, label range, NaN/Inf, value range, constant features and empty sequences of one key."""
    where = f"dataset {option!r} ({dataset_name}) key {key.name!r}"
    at = {"dataset": option, "dataset_class": dataset_name, "key": key.name}
    values = valid_values(key.name, batches)
    findings = _empty_sequence_findings(where, at, key, batches)
    if values.size == 0:
        if any(f.severe for f in findings):
            return findings
        return findings + [
            Finding(
                "warning",
                "sanity check",
                f"{where}: the first {len(batches)} batches hold no values (all sequences empty?).",
                evidence={"batches": len(batches), "values": 0},
                where=at,
                fix="Check the dataset's sequences and the key's extern_data entry: every sampled sequence is empty.",
            )
        ]
    if key.sparse_dim is not None:
        return findings + _label_findings(where, at, key, values, batches)
    if values.dtype.kind in "iub" and np.dtype(key.dtype).kind in "iub":
        findings.append(
            # a note: a step may read integer keys as it likes (class ids it indexes with, counts, positions)
            Finding(
                "note",
                "sanity check",
                f"{where} is integer data without sparse_dim, so the checks of class ids (values within the classes, "
                f"class frequencies per split) do not run on it. If these are class ids, declare "
                f"extern_data[{key.name!r}]['sparse_dim']; if they are features, declare dtype 'float32' and "
                f"normalize them.",
                evidence={"dtype": str(values.dtype), "declared_dtype": str(key.dtype)},
                where=at,
                fix=f"Declare extern_data[{key.name!r}]['sparse_dim'] for class ids, or dtype 'float32' for features.",
            )
        )
        return findings
    values = values.astype(np.float64, copy=False)
    finite = np.isfinite(values)
    if not finite.all():
        seq = _first_bad_seq(key.name, batches, lambda a: ~np.isfinite(a.astype(np.float64)))
        kinds = "NaN" if np.isnan(values).any() else "Inf"
        return findings + [
            Finding(
                "error",
                "sanity check",
                f"{where} holds {kinds} ({(~finite).sum()} values in the first {len(batches)} batches, first at "
                f"sequence index {seq}). Fix or drop these entries in the data pipeline.",
                evidence={"kind": kinds, "non_finite_values": int((~finite).sum()), "batches": len(batches)},
                where={**at, "sequence_index": seq},
                fix="Fix or drop these entries in the data pipeline.",
            )
        ]
    return findings + _range_findings(where, at, key, values, len(batches))


def _empty_sequence_findings(where: str, at: dict[str, Any], key: DataKey, batches: list) -> list[Finding]:
    """Sequences of length 0 of a variable-length key: of the whole dataset when its lengths are known
    without reading it (``key_lengths``), else of the sample (a few empty ones in a large dataset are missed)."""
    if not key.variable:
        return []
    lengths = key_lengths(getattr(batches, "dataset", None), key.name)
    whole = lengths is not None
    if whole:
        indices, scope = np.arange(len(lengths)), f"{len(lengths)} sequences"
    elif batches:
        lengths = np.concatenate([raw[key.name + ":seq_len"] for _, raw in batches])
        indices = np.concatenate([np.asarray(i) for i, _ in batches])
        scope = f"{len(lengths)} sequences in the first {len(batches)} batches"
    else:
        return []
    empty = indices[lengths == 0]
    if not len(empty):
        return []
    if whole and len(empty) == len(lengths):
        return [
            Finding(
                "error",
                "sanity check",
                f"{where}: all {len(lengths)} sequences are empty (length 0): there is nothing to train on. Is it "
                f"the right key, did the feature extraction or tokenization fail?",
                evidence={"sequences": len(lengths), "empty": len(lengths)},
                where=at,
                fix="Check the key and the feature extraction or tokenization that fills it.",
            )
        ]
    listed = ", ".join(map(str, empty[:8].tolist())) + (", ..." if len(empty) > 8 else "")
    return [
        Finding(
            "warning",
            "sanity check",
            f"{where}: {len(empty)} of {scope} {'is' if len(empty) == 1 else 'are'} empty (length 0), at sequence "
            f"{'index' if len(empty) == 1 else 'indices'} {listed}. A mean over their "
            f"frames divides by zero (NaN), attention over no frames gives NaN, pack_padded_sequence rejects them. "
            f"Drop them in the data pipeline, or make the model and loss handle length 0.",
            evidence={"empty": len(empty), "sequences": len(lengths), "whole_dataset": whole},
            where={**at, "sequence_indices": empty[:8].tolist()},
            fix="Drop the empty sequences in the data pipeline, or make the model and loss handle length 0.",
        )
    ]


def _label_findings(where: str, at: dict[str, Any], key: DataKey, values: np.ndarray, batches: list) -> list[Finding]:
    findings = []
    if values.dtype.kind == "f":
        fractional = values != np.round(values)
        if fractional.any():
            return [
                Finding(
                    "error",
                    "sanity check",
                    f"{where} declares sparse_dim {key.sparse_dim} (class ids) but holds non-integer values such as "
                    f"{values[fractional].flat[0]:g}; converting them to {key.dtype} would truncate. Are these "
                    f"probabilities or features rather than class ids?",
                    evidence={"sparse_dim": key.sparse_dim, "example": float(values[fractional].flat[0])},
                    where=at,
                    fix="Store class ids as integers, or declare the key dense if these are probabilities or features.",
                )
            ]
        findings.append(
            Finding(
                "warning",
                "sanity check",
                f"{where}: class ids are stored as {values.dtype}; store them as integers.",
                evidence={"dtype": str(values.dtype)},
                where=at,
                fix="Store the class ids as integers (int32 or int64).",
            )
        )
    bad = bad_labels(values, key.sparse_dim)
    if bad.any():
        seq = _first_bad_seq(key.name, batches, lambda a: bad_labels(a, key.sparse_dim))
        findings.append(
            Finding(
                "error",
                "sanity check",
                label_error(key.name, int(values[bad].flat[0]), seq, key.sparse_dim, where),
                evidence={
                    "value": int(values[bad].flat[0]),
                    "sparse_dim": key.sparse_dim,
                    "bad_values": int(bad.sum()),
                },
                where={**at, "sequence_index": seq},
                fix=f"Fix the labels, or declare extern_data[{key.name!r}]['sparse_dim'] to cover them.",
            )
        )
    return findings


def _range_findings(
    where: str, at: dict[str, Any], key: DataKey, values: np.ndarray, num_batches: int
) -> list[Finding]:
    findings = []
    low, high = float(values.min()), float(values.max())
    mean, std = float(values.mean()), float(values.std())
    sample = f"over the first {num_batches} batches"
    # One value per sequence is more often a regression target than an input, and a target's scale is the unit the
    # user scores in (prices in thousands): a model's output layer takes any scale. Its scale is not judged.
    judged = tuple(key.shape) not in ((), (1,))
    if judged and low >= 0 and 10 <= high <= 255 and np.all(values == np.round(values)):
        findings.append(
            Finding(
                "warning",
                "sanity check",
                f"{where} looks like raw 0-255 pixel values (integers in [{low:g}, {high:g}] {sample}). Scale them "
                f"to [0, 1] (x / 255) or standardize them.",
                evidence={"scale": "raw pixels", "min": low, "max": high, "batches": num_batches},
                where=at,
                fix="Scale the values to [0, 1] (x / 255) or standardize them.",
            )
        )
    elif judged and (abs(mean) > UNNORMALIZED or std > UNNORMALIZED):
        findings.append(
            Finding(
                "warning",
                "sanity check",
                f"{where} is far from normalized: mean {mean:.4g}, std {std:.4g}, range [{low:.4g}, {high:.4g}] "
                f"{sample}. Standardize it ((x - mean) / std with the train set's statistics).",
                evidence={
                    "scale": "unnormalized",
                    "mean": mean,
                    "std": std,
                    "min": low,
                    "max": high,
                    "batches": num_batches,
                },
                where=at,
                fix="Standardize it: (x - mean) / std with the train set's statistics.",
            )
        )
    features = values.reshape(len(values), -1)
    if len(features) < 2:
        return findings
    feature_std = features.std(axis=0)
    constant = np.flatnonzero(feature_std == 0)
    if len(constant) == features.shape[1]:
        findings.append(
            Finding(
                "warning",
                "sanity check",
                f"{where} is constant ({features.flat[0]:g} everywhere {sample}): empty input?",
                evidence={"value": float(features.flat[0]), "batches": num_batches},
                where=at,
                fix="Check that the input is filled in (the right key, a working feature extraction).",
            )
        )
        return findings
    if len(constant):
        listed = ", ".join(map(str, constant[:8])) + (", ..." if len(constant) > 8 else "")
        text = f"{where}: {len(constant)} of {features.shape[1]} features are constant {sample} (feature {listed})"
        evidence = {"constant_features": len(constant), "features": int(features.shape[1]), "batches": num_batches}
        at_features = {**at, "features": constant[:8].tolist()}
        # Constant border pixels of images are normal; a constant column of a small feature vector is not.
        empty = _empty_triangle(values)
        if empty is not None:
            n = values.shape[1]
            text += (
                f". They include all {n * (n - 1) // 2} entries {empty} the diagonal of its [{n}, {n}] matrices, all "
                f"0, while those on the other side are not: each matrix holds one direction only. If it is a graph's "
                f"adjacency, every edge is "
                f"stored one way, and message passing never carries information back along it (to a node from those "
                f"it points to); an undirected graph stores both directions (A + A.T, or the reverse edges added), "
                f"while a directed one in topological order is triangular by design"
            )
        if features.shape[1] <= 64 or len(constant) > features.shape[1] // 2:
            findings.append(
                Finding(
                    "warning",
                    "sanity check",
                    text + (". Are they filled in?" if empty is None else "."),
                    evidence=evidence if empty is None else {**evidence, "empty_triangle": empty},
                    where=at_features,
                    fix="Fill in the constant features, or drop them from the input."
                    if empty is None
                    else "For an undirected graph, store both directions (A + A.T, or the reverse edges added); a "
                    "directed graph in topological order is triangular by design.",
                )
            )
        else:
            findings.append(Finding("note", "sanity check", text + ".", evidence=evidence, where=at_features))
    # Ranges, not stds: a rarely touched image pixel has a tiny std but the same units as the others.
    spans = np.ptp(features, axis=0)
    varying = np.flatnonzero(spans > 0)
    if len(varying) > 1 and spans[varying].max() / spans[varying].min() > SCALE_SPREAD:
        i, j = int(varying[np.argmax(spans[varying])]), int(varying[np.argmin(spans[varying])])
        findings.append(
            Finding(
                "warning",
                "sanity check",
                f"{where}: features are on very different scales (feature {i} spans {spans[i]:.3g}, feature {j} "
                f"spans {spans[j]:.3g}). Standardize each feature.",
                evidence={"widest_span": float(spans[i]), "narrowest_span": float(spans[j])},
                where={**at, "widest_feature": i, "narrowest_feature": j},
                fix="Standardize each feature: (x - mean) / std per feature, with the train set's statistics.",
            )
        )
    return findings


def _empty_triangle(values: np.ndarray) -> str | None:
    """For square matrices (one per sequence): "below" or "above" when every entry on that side of the diagonal is 0
    and some on the other side are not, else None."""
    if values.ndim != 3 or values.shape[1] != values.shape[2] or values.shape[1] < 4:
        return None
    below = values[:, *np.tril_indices(values.shape[1], -1)]
    above = values[:, *np.triu_indices(values.shape[1], 1)]
    if not below.any() and above.any():
        return "below"
    if not above.any() and below.any():
        return "above"
    return None


def value_stats(key: DataKey, batches: list) -> tuple[float, float] | None:
    """Mean and std of a dense float key's values in the sample (None for other keys or non-finite data)."""
    if key.sparse_dim is not None or np.dtype(key.dtype).kind != "f":
        return None
    values = valid_values(key.name, batches).astype(np.float64, copy=False)
    if values.size == 0 or not np.isfinite(values).all():
        return None
    return float(values.mean()), float(values.std())


def split_findings(key: str, stats: dict[str, tuple[float, float]]) -> list[Finding]:
    """A dense key whose values in a split are on another scale than in train (preprocessed differently?)."""
    if "train" not in stats:
        return []
    train_mean, train_std = stats["train"]
    findings = []
    for option, (mean, std) in stats.items():
        scale = max(train_std, std, 1e-12)
        if option != "train" and (
            abs(mean - train_mean) > scale or max(train_std, std) > 3 * max(min(train_std, std), 1e-12)
        ):
            findings.append(
                Finding(
                    "warning",
                    "sanity check",
                    f"key {key!r} has mean {train_mean:.4g}, std {train_std:.4g} in train but mean {mean:.4g}, std "
                    f"{std:.4g} in {option}: are the splits preprocessed (normalized, scaled) the same way?",
                    evidence={"train_mean": train_mean, "train_std": train_std, "mean": mean, "std": std},
                    where={"dataset": option, "key": key},
                    fix=f"Preprocess {option} as train (the same normalization, with the train set's statistics).",
                )
            )
    return findings


def _first_bad_seq(key: str, batches: list, is_bad: Any) -> int:
    """The sequence index (of the dataset) of the first entry where ``is_bad`` holds."""
    for indices, raw in batches:
        lengths = raw.get(key + ":seq_len")
        for row, seq_index in enumerate(indices):
            values = raw[key][row] if lengths is None else raw[key][row, : lengths[row]]
            if np.any(is_bad(values)):
                return int(seq_index)
    return -1


def class_counts(dataset: Any, key: DataKey, batches: list) -> tuple[np.ndarray, str]:
    """Occurrences of each class of a sparse key: of the whole dataset when in memory, else of the sample."""
    if hasattr(dataset, "value_counts"):
        counts, where = dataset.value_counts(key.name, key.sparse_dim), f"all {dataset.num_seqs} sequences"
    else:
        values = valid_values(key.name, batches).astype(np.int64).ravel()
        values = values[(values >= 0) & (values < key.sparse_dim)]
        counts, where = np.bincount(values, minlength=key.sparse_dim), f"the first {len(batches)} batches"
    if labels_per_frame(key):
        where = f"the {int(counts.sum())} frames of {where}"
    return counts, where


def labels_per_frame(key: DataKey) -> bool:
    """Whether a sparse key holds several labels per sequence (frames), not one."""
    return key.variable or bool(key.shape)


def balance_findings(
    key: str, counts: dict[str, tuple[np.ndarray, str]], per_frame: bool = False, split_along: bool = False
) -> list[Finding]:
    """Classes dominating train (a note: many tasks are imbalanced by nature, and their losses handle it), missing
    from a split, or much rarer in one split than in train (a note).

    ``per_frame``: the key labels frames. A difference between the splits is a note: frames of one
    sequence are alike (a file full of digits, a long silence), so a few sequences shift the frame
    counts of a split by chance. ``split_along``: the other labels agree between the splits while this
    one differs (``split_keys``): the splits were made along this key (a held-out domain, speaker or
    source), so its difference is a note too.
    """
    if "train" not in counts:
        return []
    train, _ = counts["train"]
    findings = []
    share = train / max(train.sum(), 1)
    if train.sum() >= 100 and share.max() > 0.9:
        # Imbalanced by nature (rare events, 'no event' frames, a long tail) and handled by the loss (class
        # weights, a focal loss) or not: a fact; a model that learns only the frequencies shows at its chance level.
        findings.append(
            Finding(
                "note",
                "sanity check",
                f"train key {key!r} is imbalanced: class {int(share.argmax())} is {share.max():.0%} of "
                f"{counts['train'][1]}, so always predicting it scores {share.max():.0%} accuracy; judge the model by "
                f"a per-class score{', not by frame accuracy' if per_frame else ''}.",
                evidence={"class": int(share.argmax()), "share": float(share.max()), "counted": counts["train"][1]},
                where={"dataset": "train", "key": key},
            )
        )
    shift = "note" if per_frame or split_along else "warning"
    return findings + _shift_findings(key, counts, shift, split_along)


def order_findings(key: DataKey, batches: list, counts: np.ndarray) -> list[Finding]:
    """The train batches arrive ordered by a per-sequence label: its classes are spread over the data (the entropy
    of their frequencies, ``counts`` of the whole train set, is at least ``ORDER_MIN_ENTROPY``) but each of the first
    batches holds few of them (their mean entropy is below ``ORDER_SHARE`` of it). Under random order a batch of 8
    or more labels is nearly as mixed as the data; a stretch of training on one class at a time forgets the others."""
    if labels_per_frame(key) or len(batches) < 2:
        return []
    per_batch = [valid_values(key.name, [batch]).astype(np.int64).ravel() for batch in batches]
    if np.mean([len(labels) for labels in per_batch]) < 8:
        return []
    spread = _entropy(counts)
    if spread < ORDER_MIN_ENTROPY:
        return []
    within = float(np.mean([_entropy(np.bincount(labels[labels >= 0])) for labels in per_batch]))
    if within >= ORDER_SHARE * spread:
        return []
    classes = [len(np.unique(labels)) for labels in per_batch]
    return [
        Finding(
            "warning",
            "sanity check",
            f"train batches arrive ordered by {key.name!r}: each of the first {len(batches)} batches holds "
            f"{np.mean(classes):.1f} of its {int((counts > 0).sum())} classes on average (the entropy of a batch's "
            f"labels is {within:.2f} nats, against {spread:.2f} for the whole train set), so training sees one class "
            f"after another and forgets the earlier ones (data stored sorted by label and read in that order does this).",
            evidence={
                "batches": len(batches),
                "classes_per_batch": classes,
                "entropy_within": within,
                "entropy": spread,
            },
            where={"dataset": "train", "key": key.name},
            fix="Shuffle the train data: seq_ordering 'random' (or 'laplace:...' to bucket by length) in the train "
            "dataset's dict.",
        )
    ]


def _entropy(counts: np.ndarray) -> float:
    p = counts[counts > 0] / max(counts.sum(), 1)
    return float(-(p * np.log(p)).sum())


def split_keys(shifts: dict[str, bool]) -> set[str]:
    """The keys along which the splits were made: those whose class distributions differ between the splits
    (``shifts``: key -> whether they differ) while another label's agree. A bad split (made by the label, a
    sorted file cut in two) shifts the labels that the task predicts; a split along a domain, speaker or source
    differs in that key only."""
    if all(shifts.values()):
        return set()
    return {key for key, differs in shifts.items() if differs}


def _wrap_around(missing: np.ndarray, lacking: np.ndarray, holding: np.ndarray) -> int | None:
    """2**8 or 2**16 when the classes that one split (counts ``lacking``) misses are exactly those from that number
    up, and the classes they would wrap onto (id modulo that number) are more frequent there than in the split that
    holds them all (counts ``holding``): ids stored in 8 or 16 unsigned bits wrap around; else None."""
    for limit in (256, 65536):
        if int(missing.min()) != limit or lacking[limit:].any() or len(holding) <= limit:
            continue
        targets = np.unique(np.flatnonzero(holding[limit:] > 0) % limit)
        others = np.setdiff1d(np.flatnonzero(holding[:limit] > 0), targets)
        if not len(targets) or not len(others):
            continue
        share = lacking / max(lacking.sum(), 1) / np.maximum(holding / max(holding.sum(), 1), 1e-12)
        # each target class holds its own examples and those of the class it wrapped from: about twice its share
        if np.median(share[targets]) >= 1.5 * np.median(share[others]):
            return limit
    return None


def _wrap_text(limit: int | None, wrapping: str, holding: str) -> str:
    if limit is None:
        return ""
    bits = limit.bit_length() - 1
    return (
        f" Every id from {limit} up is missing from {wrapping}, and the ids those would become modulo {limit} are "
        f"more frequent in {wrapping} than in {holding}: the ids were stored in {bits} unsigned bits (uint{bits}) "
        f"somewhere in {wrapping}'s pipeline and wrapped around ({limit} became 0), so {wrapping} labels those "
        f"examples with other classes."
    )


def _shift_findings(
    key: str, counts: dict[str, tuple[np.ndarray, str]], shift: str, split_along: bool
) -> list[Finding]:
    """Classes of ``key`` missing from a split (at severity ``shift``), or much rarer in one split than in train (a
    note)."""
    train, train_what = counts["train"]
    share = train / max(train.sum(), 1)
    findings = []
    for option, (other, other_what) in counts.items():
        if option == "train":
            continue
        # A class rare enough that the split would likely miss it by chance proves nothing.
        expected = share * other.sum()
        only_train = np.flatnonzero((train > 0) & (other == 0) & (expected >= MIN_EXPECTED_COUNT))
        only_other = np.flatnonzero((other > 0) & (train == 0))
        if len(only_train):
            wrapped = _wrap_around(only_train, other, train)
            cause = _wrap_text(wrapped, option, "train") if wrapped else " Was the split made by label?"
            findings.append(
                Finding(
                    shift,
                    "sanity check",
                    f"key {key!r}: class(es) {_list(only_train)} occur in train ({train_what}) but never in {option} "
                    f"({other_what}), so the {option} score says nothing about them.{cause}",
                    evidence={"classes": only_train[:10].tolist(), "train": train_what, option: other_what}
                    | ({"wraps_at": wrapped} if wrapped else {}),
                    where={"dataset": option, "key": key},
                    fix=f"Split the data so that {option} holds every class of train (a stratified split).",
                )
            )
        if len(only_other):
            wrapped = _wrap_around(only_other, train, other)
            findings.append(
                Finding(
                    shift,
                    "sanity check",
                    f"key {key!r}: class(es) {_list(only_other)} occur in {option} ({other_what}) but never in train "
                    f"({train_what}); the model cannot learn them.{_wrap_text(wrapped, 'train', option)}",
                    evidence={"classes": only_other[:10].tolist(), "train": train_what, option: other_what}
                    | ({"wraps_at": wrapped} if wrapped else {}),
                    where={"dataset": option, "key": key},
                    fix=f"Split the data so that train holds every class of {option} (a stratified split).",
                )
            )
        both = (train >= 20) & (other >= 20)
        if both.any():
            ratio = (other / other.sum()) / np.maximum(train / train.sum(), 1e-12)
            off = np.flatnonzero(both & ((ratio > FREQUENCY_RATIO) | (ratio < 1 / FREQUENCY_RATIO)))
            if len(off):
                c = int(off[np.argmax(np.abs(np.log(ratio[off])))])
                # Other class proportions alone are a skewed or otherwise stratified split, often intended (a test set
                # of the classes as they occur in use): a note; split_pairing judges whether the classes themselves
                # hold the same inputs in both splits.
                findings.append(
                    Finding(
                        "note",
                        "sanity check",
                        f"key {key!r}: class {c} is {other[c] / other.sum():.1%} of {option} but "
                        f"{train[c] / train.sum():.1%} of train: the splits hold the classes in other proportions, so "
                        f"{option}'s scores weight the classes otherwise than train's loss does.",
                        evidence={
                            "class": c,
                            "share": float(other[c] / other.sum()),
                            "train_share": float(train[c] / train.sum()),
                        },
                        where={"dataset": option, "key": key},
                        fix="If the splits should come from one distribution, draw them at random or stratified.",
                    )
                )
    if split_along:
        for finding in findings:
            finding.message += (
                " The other labels are distributed alike in the splits: they were made along this key (a held-out "
                "domain, speaker or source), by design."
            )
    return findings


def _list(classes: np.ndarray) -> str:
    return ", ".join(map(str, classes[:10])) + (", ..." if len(classes) > 10 else "")
