"""RETURNN's helpers for ``PostprocessingDataset`` functions (``returnn.datasets.postprocessing``), written here:
``Sequential`` composes functions, ``LaplaceOrdering`` orders a stream in length-sorted bins.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from framework.base.errors import ConfigError


class Sequential:
    """RETURNN's ``Sequential(f, g, ...)``: the functions applied one after the other (``g(f(x))``), for
    ``map_seq`` or for ``map_seq_stream`` (not mixed); it keeps the number of sequences if all of them do."""

    def __init__(self, *functions: Callable[..., Any]):
        self.functions = functions

    def __call__(self, arg: Any, **kwargs: Any) -> Any:
        for function in self.functions:
            arg = function(arg, **kwargs)
        return arg

    @property
    def preserves_num_seqs(self) -> bool:
        return all(getattr(function, "preserves_num_seqs", False) for function in self.functions)


class LaplaceOrdering:
    """RETURNN's ``LaplaceOrdering(num_seqs_per_bin, length_key="data")`` for ``map_seq_stream``: the stream in bins
    of ``num_seqs_per_bin`` sequences, sorted by the length of ``length_key``, alternately up and down (little
    padding, still shuffled); ``complete_frac`` stays in stream order."""

    preserves_num_seqs = True

    def __init__(self, num_seqs_per_bin: int, length_key: str = "data"):
        if num_seqs_per_bin < 1:
            raise ConfigError(f"LaplaceOrdering: num_seqs_per_bin must be >= 1, got {num_seqs_per_bin}.")
        self.num_seqs_per_bin, self.length_key = num_seqs_per_bin, length_key

    def __call__(self, iterator: Iterator[Any], **kwargs: Any) -> Iterator[Any]:
        iterator = iter(iterator)
        descending = False
        while True:
            chunk = list(itertools.islice(iterator, self.num_seqs_per_bin))
            if not chunk:
                return
            fractions = [data.data["complete_frac"].raw_tensor for data in chunk if "complete_frac" in data.data]
            chunk.sort(key=lambda data: np.shape(data.data[self.length_key].raw_tensor)[0], reverse=descending)
            if len(fractions) == len(chunk):  # the progress stays monotonic for the learning-rate schedule
                for data, fraction in zip(chunk, fractions, strict=True):
                    data.data["complete_frac"].raw_tensor = fraction
            yield from chunk
            if len(chunk) < self.num_seqs_per_bin:
                return
            descending = not descending
