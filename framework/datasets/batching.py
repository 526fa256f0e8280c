"""Grouping sequences into batches, RETURNN-style: a budget of padded frames and a sequence cap."""

from __future__ import annotations

import numpy as np


def make_batches(
    order: np.ndarray,
    lengths: np.ndarray | dict[str, np.ndarray],
    batch_size: int | dict[str, int],
    max_seqs: int | None,
    packed: list[tuple[np.ndarray, int]] = (),
) -> list[np.ndarray]:
    """Split ``order`` into consecutive batches.

    A batch holds as many sequences as fit into ``batch_size`` padded frames (its longest
    sequence times its number of sequences) and at most ``max_seqs`` sequences. A sequence
    longer than ``batch_size`` gets a batch of its own. RETURNN's per-key budget: ``batch_size``
    ``{key: frames}`` with ``lengths`` ``{key: lengths}`` limits each named key's padded frames.
    ``packed``: RETURNN's ``packed_batch_size``, budgets of summed frames without padding, one (every sequence's
    length of a key, the limit) per key; both kinds of budget apply (returnn/torch/data/pipeline.py).
    """
    if isinstance(batch_size, dict):
        budgets = [(np.asarray(lengths[key])[order], int(size)) for key, size in batch_size.items() if key in lengths]
    else:
        budgets = [(np.asarray(lengths)[order], int(batch_size))]
    if any(size < 1 for _, size in budgets):
        raise ValueError(f"batch_size must be >= 1, got {batch_size}")
    cap = max_seqs if max_seqs and max_seqs > 0 else len(order) or 1
    sums = [(np.asarray(seq_lens)[order], size) for seq_lens, size in packed]
    if any(size < 1 for _, size in sums):
        raise ValueError(f"packed_batch_size must be >= 1, got {[size for _, size in sums]}")
    if len(order) and len(budgets) == 1 and budgets[0][0].max() == 1 and not sums:  # fixed-shape data: plain chunks
        size = min(budgets[0][1], cap)
        return [order[i : i + size] for i in range(0, len(order), size)]
    batches = []
    start, longest, summed = 0, [0] * len(budgets), [0] * len(sums)
    for i in range(len(order)):
        longest_if_added = [max(top, int(seq_lens[i])) for top, (seq_lens, _) in zip(longest, budgets, strict=True)]
        summed_if_added = [total + seq_lens[i].item() for total, (seq_lens, _) in zip(summed, sums, strict=True)]
        count_if_added = i - start + 1
        over = any(top * count_if_added > size for top, (_, size) in zip(longest_if_added, budgets, strict=True))
        over = over or any(total > size for total, (_, size) in zip(summed_if_added, sums, strict=True))
        if i > start and (over or count_if_added > cap):
            batches.append(order[start:i])
            start, longest_if_added = i, [int(seq_lens[i]) for seq_lens, _ in budgets]
            summed_if_added = [seq_lens[i].item() for seq_lens, _ in sums]
        longest, summed = longest_if_added, summed_if_added
    if start < len(order):
        batches.append(order[start:])
    return batches
