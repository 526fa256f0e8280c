"""Deterministic train/test splits: random (optionally stratified) or gap (out-of-distribution)."""

from __future__ import annotations

import numpy as np

from framework.base.errors import ConfigError

SPLITS = ("train", "test", "all")
SPLIT_MODES = ("random", "gap")


def split_indices(
    n: int,
    split: str,
    *,
    mode: str = "random",
    test_fraction: float = 0.2,
    seed: int = 0,
    stratify: np.ndarray | None = None,
    gap_values: np.ndarray | None = None,
    owner: str = "dataset",
) -> np.ndarray:
    """Indices of ``split`` out of ``n`` entries, in a fixed shuffled order.

    ``mode="random"`` assigns ``test_fraction`` of the entries (of each class, if ``stratify``
    holds labels) to the test split. ``mode="gap"`` puts the entries whose ``gap_values`` lie in
    the outer ``test_fraction`` (half below, half above) into the test split: the test inputs
    lie outside the range the model was trained on.
    """
    if split not in SPLITS:
        raise ConfigError(f"{owner}: split {split!r} is not one of {', '.join(SPLITS)}.")
    if mode not in SPLIT_MODES:
        raise ConfigError(f"{owner}: split_mode {mode!r} is not one of {', '.join(SPLIT_MODES)}.")
    if not 0.0 < test_fraction < 1.0:
        raise ConfigError(f"{owner}: test_fraction must be between 0 and 1, got {test_fraction}.")
    rng = np.random.default_rng(seed)
    if split == "all":
        return rng.permutation(n)
    is_test = np.zeros(n, dtype=bool)
    if mode == "gap":
        low, high = np.quantile(gap_values, [test_fraction / 2, 1 - test_fraction / 2])
        is_test = (gap_values < low) | (gap_values > high)
    else:
        groups = [np.arange(n)] if stratify is None else [np.flatnonzero(stratify == c) for c in np.unique(stratify)]
        for group in groups:
            group = rng.permutation(group)
            is_test[group[: int(round(len(group) * test_fraction))]] = True
    chosen = np.flatnonzero(is_test if split == "test" else ~is_test)
    return rng.permutation(chosen)
