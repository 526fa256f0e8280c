"""Synthetic data shaped like a config's ``extern_data``, with a learnable relation (``debug_synthetic_data``).

Every sequence gets a hidden class c (per frame when the target has a time axis). Dense inputs
are a noisy prototype of their class, in the value range of the real data (binary prototypes
when the real values lie in a bounded range like [0, 1] images, Gaussian ones scaled to the
real mean and std otherwise); sparse inputs are tokens whose id modulo the number of classes is
c. Sparse targets are c; dense targets are a fixed smooth function of the first dense input.
Sequence lengths are drawn from the real data's. A model that cannot learn this has a bug; one
that can, but not the real data, points at the data.

Which keys are targets: those with ``available_for_inference: False``; else sparse keys named
like targets (classes, targets, labels, ...); else, when there are sparse and dense keys, the
sparse ones; else none (an autoencoder: the inputs are their own target).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from framework.base.errors import ConfigError
from framework.datasets.base import Dataset
from framework.datasets.extern_data import DataKey
from framework.datasets.numpy_dataset import NumpyDataset

TARGET_NAMES = ("classes", "class", "targets", "target", "labels", "label", "y")
NUM_CLUSTERS = 8  # hidden classes when no sparse target says how many
FLIP = 0.02  # share of entries of a binary prototype that are flipped (noise)


def target_keys(extern_data: dict[str, DataKey]) -> list[str]:
    """The keys the model predicts (see the module doc)."""
    declared = [k for k, d in extern_data.items() if not d.available_for_inference]
    if declared:
        return declared
    sparse = [k for k, d in extern_data.items() if d.sparse_dim is not None]
    named = [k for k in sparse if k.lower() in TARGET_NAMES]
    if named:
        return named
    dense = [k for k, d in extern_data.items() if d.sparse_dim is None]
    return sparse if sparse and dense else []


def reference_stats(dataset: Dataset, extern_data: dict[str, DataKey], num_seqs: int = 256) -> dict[str, Any]:
    """Value range, mean, std and sequence lengths of the real data's first sequences."""
    indices = np.arange(min(num_seqs, dataset.num_seqs))
    raw = dataset.get_batch(indices)
    stats: dict[str, Any] = {"lengths": np.ones(len(indices), dtype=np.int64)}
    for key in extern_data:
        if key + ":seq_len" in raw:
            stats["lengths"] = np.maximum(raw[key + ":seq_len"], 1)
            values = np.concatenate([raw[key][i, :n] for i, n in enumerate(raw[key + ":seq_len"])])
        else:
            values = raw[key]
        values = values.astype(np.float64)
        values = values[np.isfinite(values)] if values.size else values
        low, high = (float(values.min()), float(values.max())) if values.size else (0.0, 1.0)
        mean, std = (float(values.mean()), float(values.std())) if values.size else (0.0, 1.0)
        stats[key] = {"low": low, "high": high, "mean": mean, "std": std or 1.0}
    return stats


class SyntheticLike:
    """Generates train and dev datasets for ``extern_data`` (see the module doc)."""

    def __init__(self, extern_data: dict[str, DataKey], reference: dict[str, Any], seed: int):
        self.extern_data = extern_data
        self.reference = reference
        self.targets = target_keys(extern_data)
        sparse_targets = [extern_data[k].sparse_dim for k in self.targets if extern_data[k].sparse_dim]
        self.num_classes = sparse_targets[0] if sparse_targets else NUM_CLUSTERS
        self.per_frame = any(extern_data[k].variable for k in self.targets)
        rng = np.random.default_rng([seed, 7])
        self.prototypes = {
            k: self._prototypes(rng, d)
            for k, d in extern_data.items()
            if k not in self.targets and d.sparse_dim is None
        }
        self.dense_inputs = list(self.prototypes)
        self.projections = {}
        for key in self.targets:
            declared = extern_data[key]
            if declared.sparse_dim is None:
                if not self.dense_inputs:
                    raise ConfigError(
                        f"debug_synthetic_data: the dense target {key!r} needs a dense input to be a function of, "
                        f"but the inputs are all sparse; test with a sparse target or real data."
                    )
                size_in = int(np.prod(self._feature_shape(extern_data[self.dense_inputs[0]])))
                size_out = int(np.prod(self._feature_shape(declared)))
                self.projections[key] = rng.normal(0, 1 / np.sqrt(size_in), size=(size_in, size_out))
        for key, declared in extern_data.items():
            if declared.sparse_dim is not None and key not in self.targets and declared.sparse_dim < self.num_classes:
                raise ConfigError(
                    f"debug_synthetic_data: input {key!r} has {declared.sparse_dim} symbols, fewer than the "
                    f"{self.num_classes} classes to encode."
                )

    def describe(self) -> str:
        """One line: which keys are inputs and targets, and the relation between them."""
        inputs = [k for k in self.extern_data if k not in self.targets]
        relation = (
            f"targets {', '.join(self.targets)} = hidden class{' per frame' if self.per_frame else ''} "
            f"(of {self.num_classes})"
            if self.targets
            else f"no target key: the inputs are {self.num_classes} noisy prototypes (an autoencoder's task)"
        )
        return f"inputs {', '.join(inputs)}; {relation}; dense inputs are noisy class prototypes"

    def dataset(self, num_seqs: int, seed: int, name: str) -> NumpyDataset:
        """``num_seqs`` sequences drawn with ``seed``."""
        rng = np.random.default_rng([seed, 11])
        lengths = rng.choice(self.reference["lengths"], size=num_seqs)
        variable = any(d.variable for d in self.extern_data.values())
        seqs = [self._sequence(rng, int(n) if variable else 1) for n in lengths]
        arrays: dict[str, Any] = {}
        for key, declared in self.extern_data.items():
            values = [s[key].astype(declared.dtype) for s in seqs]
            arrays[key] = values if declared.variable else np.stack(values)
        sparse_dims = {k: d.sparse_dim for k, d in self.extern_data.items() if d.sparse_dim is not None}
        dataset = NumpyDataset(arrays, sparse_dims=sparse_dims, random_seed=seed)
        dataset.name = f"SyntheticLike({name})"
        return dataset

    def _sequence(self, rng: np.random.Generator, length: int) -> dict[str, np.ndarray]:
        classes = rng.integers(self.num_classes, size=length if self.per_frame else 1)
        seq: dict[str, np.ndarray] = {}
        for key, declared in self.extern_data.items():
            if key in self.targets:
                continue
            frames = length if declared.variable else 1
            frame_classes = np.broadcast_to(classes, (frames,)) if len(classes) in (1, frames) else classes[:frames]
            if declared.sparse_dim is None:
                values = self._dense(rng, key, frame_classes)
            else:
                per_class = max(declared.sparse_dim // self.num_classes, 1)
                values = self.num_classes * rng.integers(per_class, size=frames) + frame_classes
                values = np.minimum(values, declared.sparse_dim - 1).reshape((frames,) + self._feature_shape(declared))
            seq[key] = values if declared.variable else values[0]
        for key in self.targets:
            declared = self.extern_data[key]
            if declared.sparse_dim is not None:
                seq[key] = classes if declared.variable else classes[0].reshape(self._feature_shape(declared))
            else:
                x = np.asarray(seq[self.dense_inputs[0]], dtype=np.float64)
                ref = self.reference[self.dense_inputs[0]]
                x = (x - ref["mean"]) / ref["std"]
                rows = x.reshape(length, -1) if declared.variable else x.reshape(1, -1)
                y = np.sin(2.0 * rows @ self.projections[key])
                target_ref = self.reference[key]
                y = target_ref["mean"] + target_ref["std"] * y / 0.7
                seq[key] = (
                    y.reshape((length,) + self._feature_shape(declared))
                    if declared.variable
                    else y.reshape(self._feature_shape(declared))
                )
        return seq

    def _prototypes(self, rng: np.random.Generator, declared: DataKey) -> np.ndarray:
        ref = self.reference[declared.name]
        shape = (self.num_classes,) + self._feature_shape(declared)
        if self._bounded(ref):
            return np.where(rng.random(shape) < 0.3, ref["high"], ref["low"])
        return rng.normal(0, 2, size=shape)

    def _dense(self, rng: np.random.Generator, key: str, classes: np.ndarray) -> np.ndarray:
        ref = self.reference[key]
        prototypes = self.prototypes[key][classes]
        if self._bounded(ref):
            flip = rng.random(prototypes.shape) < FLIP
            return np.where(flip, ref["low"] + ref["high"] - prototypes, prototypes)
        return ref["mean"] + ref["std"] * (prototypes + rng.normal(0, 0.5, size=prototypes.shape)) / 2

    @staticmethod
    def _bounded(ref: dict[str, float]) -> bool:
        """Values in a small fixed range such as [0, 1] images (binary prototypes keep them in it)."""
        return ref["low"] >= 0 and ref["high"] <= 1

    @staticmethod
    def _feature_shape(declared: DataKey) -> tuple[int, ...]:
        return tuple(d for d in declared.shape if d is not None)
