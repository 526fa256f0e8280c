"""RETURNN's ``chunking``: each sequence cut into (overlapping) chunks, each chunk a sequence of its own.

As RETURNN's torch engine does it (``ChunkingIterDataPipe`` in returnn/torch/data/pipeline.py): ``chunking =
"500:250"`` (size:step), an int (size = step), ``(size, step)``, or dicts ``{key: size}`` per key (keys at other
rates, e.g. ``({"classes": 100, "data": 100 * 160}, {"classes": 50, "data": 50 * 160})``; keys not named are
kept whole in every chunk). A key's chunks start at 0, step, 2 step, ... below its length and hold up to ``size``
frames; chunks shorter than ``min_chunk_size`` are dropped; every chunked key must give a sequence as many
chunks. Chunks follow the wrapped dataset's order, a sequence's chunks one after the other. ``min_seq_length`` /
``max_seq_length`` leave out whole sequences before they are cut, as in RETURNN (``seq_length_limits``).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from framework.base.errors import ConfigError
from framework.datasets.base import Dataset
from framework.datasets.loader import within_limits


def parse_chunking(chunking: Any) -> tuple[dict[str, int] | int, dict[str, int] | int]:
    """(size, step) of a ``chunking`` value as RETURNN reads it: ints, or dicts {key: frames}."""
    if isinstance(chunking, str):
        try:
            chunking = tuple(int(part) for part in chunking.split(":")) if ":" in chunking else int(chunking)
        except ValueError:
            raise ConfigError(f"chunking = {chunking!r}: give 'size:step', an int or (size, step).") from None
    size, step = chunking if isinstance(chunking, (tuple, list)) else (chunking, None)
    step = size if step in (None, 0) else step
    for name, value in (("size", size), ("step", step)):
        values = value.values() if isinstance(value, dict) else [value]
        if not all(isinstance(v, int) and not isinstance(v, bool) and v > 0 for v in values):
            raise ConfigError(f"chunking = {chunking!r}: the chunk {name} must be a positive int (or a dict of them).")
    if isinstance(size, dict) != isinstance(step, dict) or (isinstance(size, dict) and set(size) != set(step)):
        raise ConfigError(f"chunking = {chunking!r}: size and step must name the same keys.")
    return size, step


class ChunkedDataset(Dataset):
    """The chunks of ``inner``'s sequences as sequences (see the module)."""

    def __init__(
        self,
        inner: Dataset,
        chunking: Any,
        min_chunk_size: int | dict[str, int] = 0,
        seq_length_limits: tuple[Any, Any] = (None, None),
    ):
        super().__init__()
        if inner.sharded_by_rank:
            raise ConfigError(
                f"chunking: {inner.name} gives each rank other files every sub-epoch; chunking it is not supported "
                f"here. Cut the sequences when writing the files, or leave out chunking."
            )
        self.inner = inner
        self.name = f"{inner.name} in chunks"
        size, step = parse_chunking(chunking)
        variable = [key for key, info in inner.key_info().items() if None in info["shape"]]
        keys = list(size) if isinstance(size, dict) else variable
        unknown = [key for key in keys if key not in variable]
        if unknown:
            raise ConfigError(f"chunking names {unknown}, which are not variable-length keys of {inner.name}.")
        self.size = {key: size[key] if isinstance(size, dict) else size for key in keys}
        self.step = {key: step[key] if isinstance(step, dict) else step for key in keys}
        minimum = {
            key: min_chunk_size.get(key, 0) if isinstance(min_chunk_size, dict) else min_chunk_size for key in keys
        }
        self._starts = self._chunk_starts(minimum)
        self._first_chunk = np.cumsum([0] + [len(s) for s in self._starts])
        self._kept = within_limits(inner, seq_length_limits)

    def _chunk_starts(self, minimum: dict[str, int]) -> list[np.ndarray]:
        """Per sequence of ``inner``: its chunks' first frames, [chunk, chunked key]."""
        per_key = {}
        for key in self.size:
            lengths = self.inner.lengths_of(key)
            per_key[key] = [
                [s for s in range(0, int(n), self.step[key]) if min(self.size[key], int(n) - s) >= minimum[key]]
                for n in lengths
            ]
        starts = []
        for index in range(self.inner.num_seqs):
            counts = {key: len(per_key[key][index]) for key in per_key}
            if len(set(counts.values())) > 1:
                raise ConfigError(
                    f"chunking: sequence {self.inner.seq_tag(index)!r} of {self.inner.name} gives different numbers "
                    f"of chunks per key ({counts}); the sizes and steps must match the keys' rates (as in RETURNN)."
                )
            starts.append(
                np.array([[per_key[key][index][c] for key in self.size] for c in range(min(counts.values()))])
            )
        return starts

    @property
    def seq_ordering(self) -> str | None:  # the wrapped dataset orders the sequences; chunks follow
        return self.inner.seq_ordering

    @seq_ordering.setter
    def seq_ordering(self, value: str | None) -> None:
        if hasattr(self, "inner"):
            self.inner.seq_ordering = value

    @property
    def num_seqs(self) -> int:
        return sum(len(s) for s in self._starts)

    def _locate(self, index: int) -> tuple[int, np.ndarray]:
        seq = int(np.searchsorted(self._first_chunk, index, side="right")) - 1
        return seq, self._starts[seq][index - self._first_chunk[seq]]

    def key_info(self) -> dict[str, dict[str, Any]]:
        return self.inner.key_info()

    def get_seq(self, index: int) -> dict[str, np.ndarray]:
        seq, starts = self._locate(index)
        data = dict(self.inner.get_seq(seq))
        for key, start in zip(self.size, starts, strict=True):
            data[key] = data[key][int(start) : int(start) + self.size[key]]
        return data

    def seq_tag(self, index: int) -> str:
        seq, starts = self._locate(index)
        return f"{self.inner.seq_tag(seq)}[{int(starts[0])}]"

    def use_epoch(self, epoch: int) -> None:
        self.inner.use_epoch(epoch)

    def lengths_of(self, key: str) -> np.ndarray:
        lengths = self.inner.lengths_of(key)
        if key not in self.size:
            return np.concatenate([np.full(len(s), lengths[i]) for i, s in enumerate(self._starts)]).astype(np.int64)
        column = list(self.size).index(key)
        return np.concatenate(
            [
                np.minimum(self.size[key], lengths[i] - s[:, column]) if len(s) else np.zeros(0)
                for i, s in enumerate(self._starts)
            ]
        ).astype(np.int64)

    def seq_lengths(self) -> np.ndarray:
        variable = [key for key, info in self.key_info().items() if None in info["shape"]]
        if not variable:
            return np.ones(self.num_seqs, dtype=np.int64)
        return np.max([self.lengths_of(key) for key in variable], axis=0)

    @property
    def returnn_worker_shards(self) -> bool:  # type: ignore[override]  # RETURNN shards the sequences, then cuts them
        return self.inner.returnn_worker_shards

    def get_seq_order(self, epoch: int, shard: tuple[int, int] = (0, 1)) -> np.ndarray:
        first = self._first_chunk
        order = self.inner.get_seq_order(epoch, shard)
        order = order[self._kept[order]]
        return np.concatenate([np.arange(first[i], first[i + 1]) for i in order] or [np.zeros(0, dtype=np.int64)])
