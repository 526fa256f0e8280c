"""RETURNN's ``epoch_wise_filter``: in given epochs, only the shorter sequences (a curriculum).

``{(1, 5): {"max_mean_len": 200}}`` keeps, in sub-epochs 1 to 5, the shortest of the epoch's sequences such that
their mean length reaches ``max_mean_len`` (as RETURNN picks them: the first count whose mean is at least the
maximum, so the mean may end just above it), in the epoch's order. ``None`` or -1 as the end: no end.
"""

from __future__ import annotations

import sys
from typing import Any

import numpy as np

from framework.base import log
from framework.base.errors import ConfigError


class EpochWiseFilter:
    """The filter of a RETURNN ``epoch_wise_filter`` dict, checked when built.

    :param epochs_opts: ``{(first epoch, last epoch): {"max_mean_len": number}}``.
    :param owner: the dataset's name, for messages.
    """

    def __init__(self, epochs_opts: Any, owner: str):
        if not isinstance(epochs_opts, dict):
            raise ConfigError(
                f"{owner}: epoch_wise_filter must be a dict {{(first epoch, last epoch): {{'max_mean_len': n}}}}, got "
                f"{epochs_opts!r}."
            )
        self.owner = owner
        self.ranges: list[tuple[int, int, float]] = []
        for key, opts in epochs_opts.items():
            if not (isinstance(key, tuple) and len(key) == 2) or not isinstance(opts, dict):
                raise ConfigError(f"{owner}: epoch_wise_filter entry {key!r}: {opts!r}; give (first, last): {{...}}.")
            start = 1 if key[0] is None else key[0]
            end = sys.maxsize if key[1] in (None, -1) else key[1]
            if not (isinstance(start, int) and isinstance(end, int) and 1 <= start <= end):
                raise ConfigError(f"{owner}: epoch_wise_filter range {key!r} must be 1 <= first <= last (or None).")
            unknown = sorted(set(opts) - {"max_mean_len"})
            if unknown:
                raise ConfigError(
                    f"{owner}: epoch_wise_filter option(s) {', '.join(map(repr, unknown))} are not ones this dataset "
                    f"takes; RETURNN's OggZipDataset takes max_mean_len only."
                )
            self.ranges.append((start, end, float(opts.get("max_mean_len") or 0)))
        self.ranges.sort()

    def apply(self, epoch: int, order: np.ndarray, lengths: np.ndarray) -> np.ndarray:
        """The sequences of ``order`` kept in (sub-)epoch ``epoch``, with ``lengths`` of all sequences."""
        before = len(order)
        for start, end, max_mean in self.ranges:
            if start <= epoch <= end and max_mean and len(order):
                order = _shortest_to_mean(order, lengths, max_mean)
        if len(order) != before:
            log.v4(f"{self.owner}, epoch {epoch}: epoch_wise_filter keeps {len(order)} of {before} sequences.")
        return order


def _shortest_to_mean(order: np.ndarray, lengths: np.ndarray, max_mean: float) -> np.ndarray:
    # Sorted by (length, index) as RETURNN sorts; the count is RETURNN's binary search for the first prefix whose
    # mean is at least max_mean (all sequences when none is), or one whose mean equals it.
    by_length = sorted((int(lengths[i]), int(i)) for i in order)
    means = np.cumsum([length for length, _ in by_length]) / np.arange(1, len(by_length) + 1)
    low, high = 1, len(by_length) + 1
    count = None
    while low < high:
        mid = (low + high) // 2
        difference = means[mid - 1] - max_mean
        if difference < 0:
            low = mid + 1
        elif difference > 0:
            high = mid
        else:
            count = mid
            break
    count = low if count is None else count
    kept = {index for _, index in by_length[:count]}
    return np.array([i for i in order if int(i) in kept], dtype=np.int64)
