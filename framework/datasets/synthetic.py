"""Synthetic data with a known, learnable relation: tells a model bug from a data problem.

If a model cannot learn these, the bug is in the model or the training setup; if it can, look
at the real data. Each generator has a deterministic ``split`` ("train", "test", "all") made
either at random or as a gap split (test inputs outside the training range).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from framework.base.errors import ConfigError
from framework.datasets.numpy_dataset import NumpyDataset
from framework.datasets.splits import split_indices


class _GeneratedDataset(NumpyDataset):
    """A generated dataset of which one split is kept."""

    def _init_split(
        self,
        arrays: dict[str, np.ndarray],
        *,
        split: str,
        split_mode: str,
        test_fraction: float,
        data_seed: int,
        gap_values: np.ndarray,
        stratify: np.ndarray | None = None,
        sparse_dims: dict[str, int] | None = None,
        **kwargs: Any,
    ) -> None:
        keep = split_indices(
            len(gap_values),
            split,
            mode=split_mode,
            test_fraction=test_fraction,
            seed=data_seed,
            stratify=stratify if split_mode == "random" else None,
            gap_values=gap_values,
            owner=type(self).__name__,
        )
        super().__init__({key: value[keep] for key, value in arrays.items()}, sparse_dims=sparse_dims, **kwargs)


class SyntheticRegressionDataset(_GeneratedDataset):
    """Nonlinear regression: x ~ U(-1, 1), y = sin(8 (x - 1.2)) + N(0, noise_std^2).

    Keys: ``data`` [1] float32, ``targets`` [1] float32. A gap split keeps the outer 20% of x
    (by default) for testing.
    """

    def __init__(
        self,
        split: str = "train",
        *,
        num_seqs: int = 1000,
        noise_std: float = 0.01,
        split_mode: str = "random",
        test_fraction: float = 0.2,
        data_seed: int = 0,
        **kwargs: Any,
    ):
        rng = np.random.default_rng(data_seed)
        x = rng.uniform(-1.0, 1.0, size=num_seqs)
        y = np.sin(8.0 * (x - 1.2)) + rng.normal(0.0, noise_std, size=num_seqs)
        arrays = {"data": x[:, None].astype(np.float32), "targets": y[:, None].astype(np.float32)}
        self._init_split(
            arrays,
            gap_values=x,
            split=split,
            split_mode=split_mode,
            test_fraction=test_fraction,
            data_seed=data_seed,
            **kwargs,
        )


class GaussianClustersDataset(_GeneratedDataset):
    """Classification: class c draws from N(mu_c, I) with well-separated random means.

    Keys: ``data`` [dim] float32, ``classes`` [] int64 (sparse_dim ``num_classes``).

    :param class_weights: relative class frequencies; None is balanced, e.g. [0.9, 0.05, 0.05]
        makes an imbalanced set.
    :param separation: scale of the class means relative to the unit noise.
    """

    def __init__(
        self,
        split: str = "train",
        *,
        num_seqs: int = 1000,
        num_classes: int = 3,
        dim: int = 2,
        class_weights: Sequence[float] | None = None,
        separation: float = 3.0,
        split_mode: str = "random",
        test_fraction: float = 0.2,
        data_seed: int = 0,
        **kwargs: Any,
    ):
        rng = np.random.default_rng(data_seed)
        weights = np.ones(num_classes) if class_weights is None else np.asarray(class_weights, dtype=np.float64)
        if len(weights) != num_classes or (weights < 0).any() or weights.sum() <= 0:
            raise ConfigError(
                f"GaussianClustersDataset: class_weights must be {num_classes} non-negative numbers, got {class_weights}."
            )
        means = rng.normal(0.0, separation, size=(num_classes, dim))
        labels = rng.choice(num_classes, size=num_seqs, p=weights / weights.sum())
        features = means[labels] + rng.normal(size=(num_seqs, dim))
        arrays = {"data": features.astype(np.float32), "classes": labels.astype(np.int64)}
        self._init_split(
            arrays,
            gap_values=features[:, 0],
            stratify=labels,
            sparse_dims={"classes": num_classes},
            split=split,
            split_mode=split_mode,
            test_fraction=test_fraction,
            data_seed=data_seed,
            **kwargs,
        )


class ObjectPatchesDataset(_GeneratedDataset):
    """Object detection toy data: an empty patch with one filled box whose value encodes its class.

    Keys: ``data`` [size, size] float32, ``classes`` [] int64 (sparse_dim ``num_classes``),
    ``boxes`` [4] float32 (x0, y0, x1, y1 as fractions of ``size``). A gap split holds out the
    boxes whose centre lies furthest left or right.
    """

    def __init__(
        self,
        split: str = "train",
        *,
        num_seqs: int = 500,
        size: int = 32,
        num_classes: int = 3,
        min_box: int = 4,
        max_box: int = 12,
        noise_std: float = 0.0,
        split_mode: str = "random",
        test_fraction: float = 0.2,
        data_seed: int = 0,
        **kwargs: Any,
    ):
        if not 1 <= min_box <= max_box <= size:
            raise ConfigError(
                f"ObjectPatchesDataset: need 1 <= min_box <= max_box <= size, got {min_box}, {max_box}, {size}."
            )
        rng = np.random.default_rng(data_seed)
        patches = (
            rng.normal(0.0, noise_std, size=(num_seqs, size, size)) if noise_std else np.zeros((num_seqs, size, size))
        )
        labels = rng.integers(0, num_classes, size=num_seqs)
        boxes = np.zeros((num_seqs, 4))
        for i in range(num_seqs):
            w, h = rng.integers(min_box, max_box + 1, size=2)
            x0, y0 = rng.integers(0, size - w + 1), rng.integers(0, size - h + 1)
            patches[i, y0 : y0 + h, x0 : x0 + w] = (labels[i] + 1) / num_classes
            boxes[i] = (x0, y0, x0 + w, y0 + h)
        arrays = {
            "data": patches.astype(np.float32),
            "classes": labels.astype(np.int64),
            "boxes": (boxes / size).astype(np.float32),
        }
        self._init_split(
            arrays,
            gap_values=(boxes[:, 0] + boxes[:, 2]) / 2,
            sparse_dims={"classes": num_classes},
            split=split,
            split_mode=split_mode,
            test_fraction=test_fraction,
            data_seed=data_seed,
            **kwargs,
        )


DATASETS = (SyntheticRegressionDataset, GaussianClustersDataset, ObjectPatchesDataset)
