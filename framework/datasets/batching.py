"""Grouping sequences into batches, RETURNN-style: a budget of padded frames and a sequence cap."""

from __future__ import annotations

import numpy as np


def make_batches(order: np.ndarray, lengths: np.ndarray, batch_size: int, max_seqs: int | None) -> list[np.ndarray]:
    """Split ``order`` into consecutive batches.

    A batch holds as many sequences as fit into ``batch_size`` padded frames (its longest
    sequence times its number of sequences) and at most ``max_seqs`` sequences. A sequence
    longer than ``batch_size`` gets a batch of its own.
    """
    if batch_size < 1:
        raise ValueError(f"batch_size must be >= 1, got {batch_size}")
    cap = max_seqs if max_seqs and max_seqs > 0 else len(order) or 1
    seq_lens = lengths[order]
    if len(order) and seq_lens.max() == 1:  # fixed-shape data: plain chunks
        size = min(batch_size, cap)
        return [order[i : i + size] for i in range(0, len(order), size)]
    batches = []
    start, longest = 0, 0
    for i, length in enumerate(seq_lens):
        longest_if_added = max(longest, int(length))
        count_if_added = i - start + 1
        if i > start and (longest_if_added * count_if_added > batch_size or count_if_added > cap):
            batches.append(order[start:i])
            start, longest_if_added = i, int(length)
        longest = longest_if_added
    if start < len(order):
        batches.append(order[start:])
    return batches
