"""RETURNN's ``torch_batching``: the batches built by a callable, or a class of RETURNN's torch data pipeline named in a
dict, from the stream of the epoch's sequences (returnn/torch/data/pipeline.py
``get_batching_iterable_dataset_from_config``).

RETURNN calls it while the sequences are read; here it runs when the epoch's batches are planned, over the same
stream: each sequence's data dict in the epoch's order (after ``min_seq_length``/``max_seq_length`` and chunking, as
in RETURNN) with RETURNN's extra entries ``seq_tag``, ``seq_idx`` (its position in the epoch), ``epoch``,
``num_seqs`` and ``complete_frac``. A callable is called as ``torch_batching(stream, train=..., **kwargs)`` (RETURNN's
randomly named keyword among the kwargs); a dict
``{"class": "BucketOrderingIterDataPipe", ...}`` names a class of RETURNN's pipeline (RETURNN must be installed),
built with ``(stream, **the dict's other entries)``. What it returns must be a ``torch.utils.data.IterableDataset``, as
RETURNN requires (anything else stops the run with exit 2). The batches it yields (lists of the data dicts) are this
epoch's, in its order. Planning reads every sequence of the epoch once more.
"""

from __future__ import annotations

import random
from collections import defaultdict, deque
from collections.abc import Iterator
from typing import Any

import numpy as np
import torch

from framework.base.errors import ConfigError
from framework.datasets.base import Dataset

# RETURNN draws the forward-compatibility keyword's name from a generator of its own; so here, leaving the run's alone
_FWD_COMPAT = random.Random()


class _Stream(torch.utils.data.IterableDataset):
    """The epoch's sequences as RETURNN's ReturnnDatasetIterDataPipe yields them."""

    def __init__(self, dataset: Dataset, order: np.ndarray, epoch: int):
        self.dataset, self.order, self.epoch = dataset, order, epoch

    def __iter__(self) -> Iterator[dict[str, np.ndarray]]:
        count = len(self.order)
        for position, index in enumerate(self.order):
            seq = dict(self.dataset.get_seq(int(index)))
            seq["seq_tag"] = np.array(self.dataset.seq_tag(int(index)))
            seq["seq_idx"] = np.array(position)
            seq["epoch"] = np.array(self.epoch)
            seq["num_seqs"] = np.array(count)
            seq["complete_frac"] = np.array((position + 1) / count, dtype=np.float32)
            yield seq


def custom_batches(
    dataset: Dataset, order: np.ndarray, torch_batching: Any, *, train: bool, epoch: int
) -> list[np.ndarray]:
    """The batches (arrays of the dataset's indices) that ``torch_batching`` makes of ``order``."""
    stream = _Stream(dataset, order, epoch)
    if isinstance(torch_batching, dict):
        args = dict(torch_batching)
        name = args.pop("class", None)
        try:
            from returnn.torch.data import pipeline
        except ImportError:
            raise ConfigError(
                f"torch_batching = {torch_batching!r} names a class of RETURNN's torch data pipeline, which needs "
                f"RETURNN installed (pip install returnn); or give a callable."
            ) from None
        cls = getattr(pipeline, name, None) if isinstance(name, str) else None
        if cls is None:
            raise ConfigError(f"torch_batching = {torch_batching!r}: {name!r} is no class of RETURNN's data pipeline.")
        batching = cls(stream, **args)
    elif callable(torch_batching):
        # RETURNN adds a randomly named keyword (get_fwd_compat_kwargs): a callable must take **kwargs there
        extra = {f"__fwd_compat_random_arg_{_FWD_COMPAT.randrange(100):03}": None}
        try:
            batching = torch_batching(stream, train=train, **extra)
        except TypeError as exc:
            if "argument" not in str(exc):  # the callable's own error, not how it was called
                raise
            raise ConfigError(
                f"torch_batching = {torch_batching!r} cannot be called as RETURNN calls it, with the stream of "
                f"sequences, train= and **kwargs ({exc}); define it as cls(dataset, *, train, **kwargs)."
            ) from None
    else:
        raise ConfigError(
            f"torch_batching = {torch_batching!r}: give a callable (dataset, *, train, **kwargs) -> batches, or a dict "
            f"naming a class of RETURNN's data pipeline, as RETURNN takes it."
        )
    if not isinstance(batching, torch.utils.data.IterableDataset):
        raise ConfigError(
            f"torch_batching = {torch_batching!r} gave a {type(batching).__name__}, not a "
            f"torch.utils.data.IterableDataset, which RETURNN requires of it (an AssertionError there): make it a class "
            f"deriving from torch.utils.data.IterableDataset whose __iter__ yields the batches (lists of the "
            f"sequences' data dicts), as RETURNN's data pipeline classes are."
        )
    by_tag: dict[str, deque[int]] = defaultdict(deque)
    for index in order:
        by_tag[dataset.seq_tag(int(index))].append(int(index))
    batches = []
    for batch in batching:
        indices = []
        for seq in batch:
            tags = by_tag.get(str(seq["seq_tag"]))  # RETURNN's pipeline classes may copy the dicts
            if not tags:
                raise ConfigError(
                    f"torch_batching {torch_batching!r} gave a sequence ({str(seq.get('seq_tag'))!r}) that is not one "
                    f"of the epoch's, or gave one twice; it must batch the sequences of the stream it gets."
                )
            indices.append(tags.popleft())
        batches.append(np.array(indices, dtype=np.int64))
    return batches
