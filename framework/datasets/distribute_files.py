"""RETURNN's ``DistributeFilesDataset``: a corpus of many files, a few of them per sub-epoch, each rank its own.

Each full epoch (``partition_epoch`` sub-epochs) the list of files is shuffled with a seed of the
config's ``random_seed`` and the full epoch (``seq_ordering="random"``; "default" keeps the listed
order; in a RETURNN config RETURNN's shuffle, seeded by the full epoch and ``random_seed_offset``), then cut into ``partition_epoch`` consecutive pieces of about equal size on disk, and each
piece is dealt to the ranks by size: every file once per full epoch, each by one rank. The files
of a sub-epoch follow from the epoch number alone, so a run resumed at epoch k reads what an
uninterrupted run reads there. Only the current sub-epoch's files are opened:
``get_sub_epoch_dataset(files)`` says how (a dataset dict, e.g. an ``HDFDataset`` of them).

Ranks get about, not exactly, the same amount of data; torch.distributed's ranks must take the
same number of steps, so each epoch every rank stops after as many batches as the rank with the
fewest has (``Distributed.train_plan``), as RETURNN ends a sub-epoch on all ranks when one runs out.
"""

from __future__ import annotations

import ast
import json
import os
from collections.abc import Callable
from typing import Any

import numpy as np

from framework.base import log
from framework.base.disk import format_size
from framework.base.errors import ConfigError
from framework.base.safe_create import refuse_special
from framework.datasets.base import Dataset
from framework.datasets.registry import init_dataset
from framework.datasets.seq_order import returnn_seed

FILE_ORDERINGS = ("default", "random")


class DistributeFilesDataset(Dataset):
    """Many files distributed over sub-epochs and, with ``distrib_shard_files``, over the ranks.

    :param files: the corpus; an entry is a path, or a tuple, list or dict of paths (nested) that belong
        together (the features and the alignment of one shard), sized as the sum of its files. As in RETURNN, also
        a function returning the list, or the path of a file that lists them: ``.txt`` (one path per line; empty
        lines and ``#`` comments skipped), ``.json`` or ``.py`` (a Python literal list).
    :param get_sub_epoch_dataset: ``get_sub_epoch_dataset(entries) -> dataset dict`` for the entries of one
        sub-epoch of this rank; the dict sets ``seq_ordering`` (the order within the sub-epoch) and no
        ``partition_epoch``.
    :param partition_epoch: sub-epochs per pass over all files.
    :param seq_ordering: the order of the files: "random" (shuffled every full epoch) or "default" (as listed).
    :param distrib_shard_files: under torchrun, each rank reads only its own files (its part of every
        sub-epoch) instead of every rank all files of the sub-epoch.
    :param rank: this process's rank among ``world_size``; by default torch.distributed's (0 of 1 without it).
    :param world_size: the number of ranks that share the files.
    :param use_worker_proc: RETURNN's loading in a worker process (with ``preload_next_n_sub_epochs``,
        ``buffer_size``): accepted, no effect on what is read.
    """

    returnn_window = "ignores"  # what RETURNN's class does with window (context_window.py)
    returnn_eval_sorted = False  # RETURNN stops on a dev/eval "sorted" (its only order here: the default)

    def __init__(
        self,
        files: list[Any] | str | os.PathLike | Callable[[], list[Any]],
        get_sub_epoch_dataset: Callable[[list[Any]], dict[str, Any]],
        *,
        distrib_shard_files: bool = False,
        rank: int | None = None,
        world_size: int | None = None,
        use_worker_proc: bool = True,
        preload_next_n_sub_epochs: int | None = None,
        buffer_size: int = 1,
        **kwargs: Any,
    ):
        super().__init__(**kwargs)
        # RETURNN's loading of the next sub-epoch's files in a worker process while this one trains: how fast, not
        # what is read; here a sub-epoch's dataset is built when it starts.
        del use_worker_proc, preload_next_n_sub_epochs, buffer_size
        if not callable(get_sub_epoch_dataset):
            raise ConfigError(
                f"DistributeFilesDataset: get_sub_epoch_dataset must be a function of the files of a sub-epoch that "
                f"returns a dataset dict, got {get_sub_epoch_dataset!r}."
            )
        self.files = _file_list(files)
        self.get_sub_epoch_dataset = get_sub_epoch_dataset
        self.sharded_by_rank = bool(distrib_shard_files)
        self.rank, self.world_size = _place(self.sharded_by_rank, rank, world_size)
        parts = self.world_size * self.partition_epoch
        if len(self.files) < parts:
            raise ConfigError(
                f"DistributeFilesDataset: {len(self.files)} files cannot fill partition_epoch {self.partition_epoch} x "
                f"{self.world_size} ranks = {parts} parts of at least one file each. Give more (smaller) files or "
                f"lower partition_epoch."
            )
        self.sizes = [sum(_file_size(path) for path in _paths(entry)) for entry in self.files]
        self._epoch = 1  # the sub-epoch whose sequences get_seq reads; get_seq_order and use_epoch move it
        # By sub-epoch: the current one and the one before (a check may plan another epoch than the training's).
        self._sub_datasets: dict[int, Dataset] = {}
        where = f", rank {self.rank} of {self.world_size}" if self.sharded_by_rank else ""
        self.name = f"DistributeFilesDataset({len(self.files)} files, partition_epoch {self.partition_epoch}{where})"

    def file_parts(self, full_epoch: int) -> list[list[int]]:
        """Indices into ``files`` of every rank's sub-epochs of ``full_epoch`` (1-based): rank r reads part
        ``r * partition_epoch + i`` in its sub-epoch i.

        The shuffled list is cut into ``partition_epoch`` consecutive pieces of about equal size, and each piece is
        dealt to the ranks, the largest file first to the rank with the least so far: the ranks' parts of a
        sub-epoch are as close as the files allow, so that few batches are left out to equalize the steps.
        """
        if self.seq_ordering not in FILE_ORDERINGS:
            raise ConfigError(
                f"DistributeFilesDataset: seq_ordering {self.seq_ordering!r} orders its files and must be one of "
                f"{', '.join(FILE_ORDERINGS)}; the order of the sequences within a sub-epoch is the seq_ordering of "
                f"the dataset that get_sub_epoch_dataset returns."
            )
        order = np.arange(len(self.files))
        if self.seq_ordering == "random" and self.returnn_seeding:  # RETURNN's shuffle of its file list
            seed = returnn_seed(full_epoch, 1, self.random_seed_offset, self.fixed_random_seed)
            shuffled = list(range(len(self.files)))
            np.random.RandomState(seed).shuffle(shuffled)
            order = np.array(shuffled, dtype=np.int64)
        elif self.seq_ordering == "random":
            order = np.random.default_rng([self.random_seed, full_epoch]).permutation(len(self.files))
        sub_epochs = []
        for piece in split_by_size([self.sizes[i] for i in order], self.partition_epoch, self.world_size):
            files = [int(order[j]) for j in piece]
            shares = deal_by_size([self.sizes[i] for i in files], self.world_size)
            sub_epochs.append([[files[j] for j in share] for share in shares])
        return [sub_epochs[i][rank] for rank in range(self.world_size) for i in range(self.partition_epoch)]

    def sub_epoch_part(self, epoch: int) -> list[int]:
        """Indices into ``files`` of what this rank reads in (sub-)epoch ``epoch`` (1-based)."""
        full_epoch, part = divmod(epoch - 1, self.partition_epoch)
        return self.file_parts(full_epoch + 1)[self.rank * self.partition_epoch + part]

    def get_seq_order(self, epoch: int) -> np.ndarray:
        self.use_epoch(epoch)
        full_epoch = (epoch - 1) // self.partition_epoch + 1
        # The sub-epoch's dataset is one pass over its files: it is ordered as the full epoch it belongs to.
        return self.filtered(self._current().get_seq_order(full_epoch))

    def use_epoch(self, epoch: int) -> None:
        self._epoch = epoch

    def _current(self) -> Dataset:
        """The dataset of the current sub-epoch's files, built when first needed."""
        if self._epoch not in self._sub_datasets:
            for older in list(self._sub_datasets)[:-1]:  # let go of the files of all but the latest other one
                del self._sub_datasets[older]
            part = self.sub_epoch_part(self._epoch)
            files, size = [self.files[i] for i in part], sum(self.sizes[i] for i in part)
            log.v4(f"{self.name}: epoch {self._epoch} reads {len(files)} files ({format_size(size)})")
            spec = self.get_sub_epoch_dataset(files)
            option = f"{self.name}: get_sub_epoch_dataset(...) of epoch {self._epoch}"
            if not isinstance(spec, dict) or "seq_ordering" not in spec or spec.get("partition_epoch", 1) != 1:
                raise ConfigError(
                    f"{option} returned {spec!r}; it must return a dataset dict with an explicit 'seq_ordering' (the "
                    f"order within the sub-epoch, e.g. 'random') and without 'partition_epoch' (the sub-epochs are "
                    f"DistributeFilesDataset's), e.g. {{'class': 'HDFDataset', 'files': files, 'seq_ordering': "
                    f"'random'}}."
                )
            self._sub_datasets[self._epoch] = init_dataset(
                spec, option=option, random_seed=self.random_seed, parent=self
            )
        return self._sub_datasets[self._epoch]

    @property
    def num_seqs(self) -> int:
        """Sequences of the current sub-epoch (of this rank)."""
        return self._current().num_seqs

    def key_info(self) -> dict[str, dict[str, Any]]:
        return self._current().key_info()

    def seq_tag(self, index: int) -> str:
        """The current sub-epoch dataset's tag of the sequence (its files' tags, as in RETURNN)."""
        return self._current().seq_tag(index)

    def get_seq(self, index: int) -> dict[str, np.ndarray]:
        return self._current().get_seq(index)

    def get_batch(self, indices: np.ndarray) -> dict[str, np.ndarray]:
        return self._current().get_batch(indices)

    def lengths_of(self, key: str) -> np.ndarray:
        return self._current().lengths_of(key)

    def seq_lengths(self) -> np.ndarray:
        return self._current().seq_lengths()

    def __repr__(self) -> str:
        return f"<{self.name}>"


def split_by_size(sizes: list[int], parts: int, min_count: int = 1) -> list[range]:
    """Consecutive index ranges of ``sizes`` into ``parts`` parts of about equal sum, each of ``min_count``
    entries at least.

    Each part takes the next entry while that brings it closer to an equal share of what is left, and leaves
    enough entries for the later parts.
    """
    if parts < 1 or min_count < 1 or parts * min_count > len(sizes):
        raise ValueError(f"cannot cut {len(sizes)} entries into {parts} parts of at least {min_count}")
    result, start, left = [], 0, sum(sizes)
    for part in range(parts - 1):
        target = left / (parts - part)
        end = start + min_count
        taken = sum(sizes[start:end])
        last_end = len(sizes) - min_count * (parts - part - 1)
        while end < last_end and abs(taken + sizes[end] - target) <= abs(taken - target):
            taken += sizes[end]
            end += 1
        result.append(range(start, end))
        start, left = end, left - taken
    result.append(range(start, len(sizes)))
    return result


def deal_by_size(sizes: list[int], count: int) -> list[list[int]]:
    """Indices of ``sizes`` dealt into ``count`` shares of about equal sum, each in the given order.

    The largest entry goes first, each to the share with the least so far (the one with fewer entries on a tie,
    so that every share gets one when there are enough): the shares differ by at most the largest entry.
    """
    shares: list[list[int]] = [[] for _ in range(count)]
    totals = [0] * count
    for i in sorted(range(len(sizes)), key=lambda i: -sizes[i]):
        share = min(range(count), key=lambda k: (totals[k], len(shares[k])))
        shares[share].append(i)
        totals[share] += sizes[i]
    return [sorted(share) for share in shares]


def _file_list(files: Any) -> list[Any]:
    """The list of entries ``files`` gives: a list, a function returning one, or a file listing them."""
    if callable(files):
        files = files()
    if isinstance(files, (str, os.PathLike)):
        path = os.fspath(files)
        ext = os.path.splitext(path)[1]
        if ext not in (".txt", ".json", ".py"):
            raise ConfigError(
                f"DistributeFilesDataset: files = {path!r}: a file list must be .txt (one path per line), .json or .py "
                f"(a literal list), as RETURNN reads it; or give the list itself."
            )
        refuse_special(path, "the file list of DistributeFilesDataset")
        try:
            with open(path, encoding="utf8") as f:
                text = f.read()
            if ext == ".txt":
                files = [
                    line.strip() for line in text.splitlines() if line.strip() and not line.strip().startswith("#")
                ]
            else:
                files = json.loads(text) if ext == ".json" else ast.literal_eval(text)
        except (OSError, ValueError, SyntaxError) as exc:
            raise ConfigError(f"DistributeFilesDataset: cannot read the file list {path!r} ({exc}).") from None
    if not isinstance(files, (list, tuple)):
        raise ConfigError(f"DistributeFilesDataset: files must be a list of entries, got {type(files).__name__}.")
    return list(files)


def _place(sharded: bool, rank: int | None, world_size: int | None) -> tuple[int, int]:
    """(rank, number of ranks) that share the files: given, or torch.distributed's; (0, 1) when not sharded."""
    if not sharded:
        return 0, 1
    if (rank is None) != (world_size is None):
        raise ConfigError("DistributeFilesDataset: give both rank and world_size, or neither (torch.distributed's).")
    if rank is None:
        import torch.distributed as dist

        if not (dist.is_available() and dist.is_initialized()):
            return 0, 1
        rank, world_size = dist.get_rank(), dist.get_world_size()
    if not 0 <= rank < world_size:
        raise ConfigError(f"DistributeFilesDataset: rank {rank} is not in [0, world_size {world_size}).")
    return rank, world_size


def _paths(entry: Any) -> list[str]:
    """The paths of one ``files`` entry: a path, or nested tuples, lists and dicts of paths."""
    if isinstance(entry, (str, os.PathLike)):
        return [os.fspath(entry)]
    if isinstance(entry, dict):
        return [path for value in entry.values() for path in _paths(value)]
    if isinstance(entry, (tuple, list)):
        return [path for value in entry for path in _paths(value)]
    raise ConfigError(
        f"DistributeFilesDataset: a files entry must be a path or a tuple, list or dict of paths, got {entry!r}."
    )


def _file_size(path: str) -> int:
    try:
        return os.path.getsize(path)
    except OSError as exc:
        raise ConfigError(f"DistributeFilesDataset: cannot read the size of {path!r} ({exc}). Does it exist?") from None


DATASETS = (DistributeFilesDataset,)
