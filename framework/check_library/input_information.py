"""Does the data carry information? Per batch key, over sampled batches: nearly constant values, one id that
dominates, labels of one class.

A model can only learn what its inputs distinguish. Images scaled twice (``x / 255`` in the dataset and
again in the step) or normalised with the statistics of another scale vary by a fraction of a percent of
their magnitude: to a network initialised for inputs of unit scale every example looks alike. A vocabulary
lookup that misses (built from lowercased text, a ``min_freq`` meant for another corpus) turns most tokens
into the unknown id. Each measure is read on the real frames only (no padding).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from framework.check_library.data_checks import valid_values
from framework.datasets.extern_data import DataKey

# A float key whose values vary across entries by less than this fraction of their scale (at least 1) is
# nearly constant: healthy inputs vary by tens of percent (normalised features by about 1).
NEARLY_CONSTANT = 0.01
# A sparse input key whose most frequent id holds at least this share of its real frames is dominated by it
# (the most frequent word of natural text holds a few percent; a [CLS] token one per sequence).
DOMINANT_SHARE = 0.5


@dataclass
class KeyInformation:
    """What one key's values tell apart: ``problem`` (empty: nothing wrong found) and the numbers behind it."""

    key: str
    problem: str = ""
    evidence: dict[str, float | int | str] = field(default_factory=dict)


def float_spread(values: np.ndarray) -> tuple[float, float]:
    """(spread, scale) of float ``values`` [entries, *features]: the mean over features of the standard deviation
    across entries, and the larger of the values' root mean square and 1."""
    flat = values.reshape(values.shape[0], -1).astype(np.float64)
    spread = float(flat.std(axis=0).mean()) if flat.shape[0] > 1 else 0.0
    scale = max(float(np.sqrt((flat**2).mean())), 1.0)
    return spread, scale


def _without_trailing_padding(ids: np.ndarray) -> np.ndarray:
    """The ids of a fixed-length token key [entries, T] without each row's trailing run of its last id (padding to
    a fixed length, e.g. a tokenizer's padding="max_length", holds no information but is no defect); flat."""
    if ids.ndim != 2 or ids.shape[1] < 2:
        return ids.ravel()
    same = ids == ids[:, -1:]
    trailing = np.flip(np.cumprod(np.flip(same, axis=1), axis=1), axis=1).astype(bool)
    trailing[:, 0] = False  # a row of one repeated id keeps one of them
    return ids[~trailing]


def key_information(key: DataKey, batches: list, label_keys: set[str]) -> KeyInformation:
    """How much ``key`` varies over ``batches`` (``[(indices, raw arrays)]``, as ``data_checks.sample_batches``)."""
    values = valid_values(key.name, batches)
    info = KeyInformation(key.name, evidence={"entries": int(values.shape[0]) if values.ndim else 0})
    if values.ndim == 0 or values.shape[0] < 2:
        return info
    if key.sparse_dim is not None or not np.issubdtype(values.dtype, np.floating):
        ids, counts = np.unique(_without_trailing_padding(values.astype(np.int64)), return_counts=True)
        top = int(np.argmax(counts))
        share = float(counts[top] / counts.sum())
        info.evidence.update({"distinct ids": len(ids), "most frequent id": int(ids[top]), "its share": share})
        if key.name in label_keys:
            info.evidence["label distribution"] = ", ".join(
                f"{i}: {c / counts.sum():.0%}" for i, c in sorted(zip(ids, counts, strict=True))[:10]
            )
            if len(ids) == 1:
                info.problem = f"every label of {key.name!r} is {int(ids[0])}: there is nothing to tell apart"
        elif len(ids) == 1 or (share >= DOMINANT_SHARE and (key.sparse_dim or len(ids)) > 2):
            info.problem = (
                f"{share:.0%} of the real frames of {key.name!r} are the id {int(ids[top])} ({len(ids)} distinct ids "
                f"in {counts.sum()} frames): the inputs hardly differ. An unknown-word id that most tokens map to "
                f"does this (a vocabulary built from differently cased or tokenized text, a min_freq too high for "
                f"the corpus, ids from another vocabulary)"
            )
        return info
    spread, scale = float_spread(values)
    info.evidence.update({"spread": spread, "scale": scale, "relative spread": spread / scale})
    info.evidence.update({"min": float(values.min()), "max": float(values.max())})
    if spread / scale < NEARLY_CONSTANT:
        info.problem = (
            f"the values of {key.name!r} are nearly constant: they vary across entries by {spread:.3g} (standard "
            f"deviation) at a scale of {scale:.3g} (range {float(values.min()):.4g} to {float(values.max()):.4g}), "
            f"so every example looks alike to the model. Inputs scaled or normalised twice (x / 255 in the dataset "
            f"and again in the step; Normalize with the statistics of another scale) do this"
        )
    return info


def data_information(extern_data: dict[str, DataKey], batches: list, label_keys: set[str]) -> list[KeyInformation]:
    """``key_information`` of every key the batches hold."""
    present = batches[0][1].keys() if batches else ()
    return [key_information(key, batches, label_keys) for name, key in extern_data.items() if name in present]
