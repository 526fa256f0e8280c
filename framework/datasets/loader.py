"""From a dataset to device batches: batch planning, collation, label checks, DataLoader workers."""

from __future__ import annotations

import copy
import functools
from collections.abc import Iterator
from collections.abc import Set as AbstractSet
from typing import Any

import numpy as np
import torch

from framework.base import log
from framework.base.accelerator import is_accelerator
from framework.base.errors import ConfigError, DataError
from framework.base.host_syncs import mark_host_side
from framework.datasets.base import Dataset
from framework.datasets.batching import make_batches
from framework.datasets.custom_batching import custom_batches
from framework.datasets.extern_data import DataKey, bad_labels, label_error, one_hot_keys
from framework.datasets.worker_seeding import worker_init


class RankPlan(list):
    """A batch plan of this rank's own data only (a dataset ``sharded_by_rank``, or RETURNN's ``dataset_distribution``):
    torch.distributed takes it as it is, not every N-th batch of it (``Distributed.train_plan``), cut to the steps of
    the rank with the fewest batches. ``share_rest``: the batches cut off hold sequences no other rank trains (a
    shard of the epoch's): they are shared out over the ranks for one more step."""

    share_rest = False


class BatchLoader:
    """Delivers the batches of one dataset as ``(sequence indices, {key: tensor})``.

    The batch plan of an epoch (which sequences go together) is fixed before the epoch starts,
    so the number of steps is known for progress reports, and a step can be identified and
    replayed by its sequence indices.
    """

    def __init__(
        self,
        dataset: Dataset,
        extern_data: dict[str, DataKey],
        *,
        option: str,
        batch_size: int | dict[str, int],
        max_seqs: int | None,
        device: torch.device,
        packed_batch_size: int | dict[str, int] | None = None,
        packed_batch_cost: dict[str, Any] | None = None,
        torch_batching: Any = None,
        dataloader_opts: dict[str, Any] | None = None,
        labels_checked: AbstractSet[str] = frozenset(),
        seq_length_limits: tuple[Any, Any] = (None, None),
        shuffle_batches: tuple[int, int] | None = None,
        float_dtype: torch.dtype | None = None,
        shard_workers: bool | None = None,
        rank_distribution: tuple[str, int, int] | None = None,
    ):
        self.dataset = dataset
        self.extern_data = extern_data
        self.option = option
        self.batch_size = batch_size
        self.max_seqs = max_seqs
        self.packed_batch_size = packed_batch_size  # RETURNN's limit on summed frames (packed_budgets)
        self.packed_batch_cost = dict(packed_batch_cost or {})  # RETURNN's per-sequence costs (packed_budgets)
        self.torch_batching = torch_batching  # RETURNN's batching callable or pipeline class (custom_batching)
        self.device = device
        self.dataloader_opts = dict(dataloader_opts or {})
        self.one_hot = one_hot_keys(extern_data, dataset.key_info())
        self.labels_checked = frozenset(labels_checked)  # in all of the dataset at startup: not again per batch
        self.seq_length_limits = seq_length_limits  # RETURNN's (min_seq_length, max_seq_length)
        self.shuffle_batches = shuffle_batches  # RETURNN's online_shuffle_batches: (buffer size, seed)
        self.float_dtype = float_dtype  # RETURNN's default_float_dtype: floating-point data are given in it
        self.shard_workers = shard_workers  # RETURNN's torch_dataloader_shard_workers (worker_plans; None: off)
        # RETURNN's torch_distributed dataset_distribution of the train data: ("random_seed_offset" | "shard", rank,
        # ranks); each rank plans its own batches (a RankPlan). None: the ranks split one plan of the epoch.
        self.rank_distribution = rank_distribution
        self._check_limit_keys()
        self._left_out_logged = False
        self._last_plan: tuple[int, list[np.ndarray]] | None = None
        self.reseeded: tuple[str, ...] = ()  # the dataset's generators reseeded in each worker (worker_seeding)

    def reseeding(self, paths: tuple[str, ...]) -> BatchLoader:
        """This loader, with the dataset's generators at ``paths`` reseeded in each DataLoader worker."""
        loader = copy.copy(self)
        loader.reseeded = tuple(paths)
        return loader

    def plan(self, epoch: int) -> list[np.ndarray]:
        """The batches of ``epoch`` as arrays of sequence indices (do not modify them).

        The latest epoch's plan is kept: the startup checks and the epoch itself ask for the same one.
        """
        if self._last_plan is None or self._last_plan[0] != epoch:
            batches = interleaved(self.worker_plans(epoch))
            own = self.dataset.sharded_by_rank or self.rank_distribution is not None
            self._last_plan = epoch, RankPlan(batches) if own else batches
            if own and self.rank_distribution is not None and self.rank_distribution[0] == "shard":
                self._last_plan[1].share_rest = True  # its sequences are this rank's shard only
        self.dataset.use_epoch(epoch)  # the batches of this plan are what get_batch reads now
        return self._last_plan[1]

    def worker_plans(self, epoch: int) -> list[list[np.ndarray]]:
        """The batches of ``epoch`` that each DataLoader worker of RETURNN's torch engine makes (one list without
        workers, or with one): with ``num_workers`` N > 1, RETURNN's DataLoader runs its batching in each worker, on
        the worker's shard of the sequences (``torch_dataloader_shard_workers``; ``get_seq_order``'s ``shard``), or
        on all of them (then every batch comes N times), and takes the workers' batches in turn (``interleaved``).
        ``shard_workers`` None (a config for this framework): one plan, the workers only read its batches."""
        workers = int(self.dataloader_opts.get("num_workers") or 0) if self.shard_workers is not None else 0
        count = workers if workers > 1 and self.shard_workers else 1
        # RETURNN's "shard" distribution: the rank's shard of the sequences, and each worker's of that
        # (ReturnnDatasetIterDataPipe: shard rank * workers + worker of ranks * workers)
        rank, ranks = (
            (0, 1)
            if self.rank_distribution is None or self.rank_distribution[0] != "shard"
            else (self.rank_distribution[1:])
        )
        if ranks > 1 and not self.dataset.returnn_worker_shards:
            raise ConfigError(
                f"torch_distributed dataset_distribution 'shard': RETURNN gives each rank its shard of the sequences "
                f"of dataset {self.option!r}, which {self.dataset.name} cannot give here (RETURNN asserts its "
                f"supports_sharding). Leave dataset_distribution out (RETURNN's default 'random_seed_offset': every "
                f"rank goes through all sequences in its own order)."
            )
        if count > 1 and not self.dataset.returnn_worker_shards:
            raise ConfigError(
                f"torch_dataloader_opts num_workers = {workers} with torch_dataloader_shard_workers (RETURNN's "
                f"default from behavior_version 37): RETURNN gives each DataLoader worker its shard of the sequences "
                f"of dataset {self.option!r}, which {self.dataset.name} cannot give here (RETURNN's StaticDataset, "
                f"ConcatDataset, CombinedDataset and MultiProcDataset stop on it; its MetaDataset, "
                f"PostprocessingDataset and DistributeFilesDataset shard in their own way, not reproduced). Set "
                f"num_workers to 1, or torch_dataloader_shard_workers = False (every worker reads all sequences)."
            )
        plans = []
        for index in range(count):
            shard = (rank * count + index, ranks * count)
            order = self.within_length_limits(
                self.dataset.get_seq_order(epoch, shard) if shard[1] > 1 else self.dataset.get_seq_order(epoch)
            )
            if self.torch_batching is not None:
                batches = custom_batches(
                    self.dataset, order, self.torch_batching, train=self.option == "train", epoch=epoch
                )
            else:
                batches = make_batches(
                    order, self.batch_lengths(), self.batch_size, self.max_seqs, self.packed_budgets()
                )
            if self.shuffle_batches is not None and not self.dataset.sharded_by_rank:
                batches = shuffled_in_blocks(batches, *self.shuffle_batches, epoch + 7919 * index)
            plans.append(batches)
        return plans * workers if workers > 1 and not self.shard_workers else plans

    def batch_lengths(self) -> np.ndarray | dict[str, np.ndarray]:
        """What ``batch_size`` counts: the sequences' lengths, or per key for a per-key ``batch_size`` dict."""
        if not isinstance(self.batch_size, dict):
            return self.dataset.seq_lengths()
        lengths = {key: self.dataset.lengths_of(key) for key in self.batch_size if key in self._variable_keys()}
        if not lengths:
            raise ConfigError(
                f"batch_size {self.batch_size!r} names none of the variable-length keys of dataset {self.option!r} "
                f"({', '.join(self._variable_keys()) or 'none'}); name those keys, or give one number."
            )
        return lengths

    def packed_budgets(self) -> list[tuple[np.ndarray, int]]:
        """RETURNN's ``packed_batch_size`` as ``make_batches`` budgets: (every sequence's frames of a key, the limit)
        for each key of the dataset with an axis (a number: all of them, as RETURNN sums every key's first axis,
        fixed-shape ones too; a dict: the keys it names)."""
        limit = self.packed_batch_size
        if limit is None and not self.packed_batch_cost:
            return []
        info = self.dataset.key_info()
        named = limit if isinstance(limit, dict) else {key: limit for key in info if info[key]["shape"]}
        costs = self.cost_budgets(named if isinstance(limit, dict) else {})
        named = {key: size for key, size in named.items() if key not in self.packed_batch_cost}
        unknown = sorted(set(named) - {key for key in info if info[key]["shape"]}, key=str)
        if unknown:
            raise ConfigError(
                f"packed_batch_size {limit!r} names {', '.join(map(repr, unknown))}, which is no key of dataset "
                f"{self.option!r} with an axis ({', '.join(sorted(info)) or 'none'}); name those keys, or give one "
                f"number."
            )
        budgets = []
        for key, size in named.items():
            first = info[key]["shape"][0]
            frames = self.dataset.lengths_of(key) if first is None else np.full(self.dataset.num_seqs, first)
            budgets.append((frames, size))
        return budgets + costs

    def cost_budgets(self, limits: dict[str, Any]) -> list[tuple[np.ndarray, Any]]:
        """RETURNN's ``packed_batch_cost`` as ``make_batches`` budgets: each function called with every sequence's
        lengths (a NumbersDict of each key's first axis, as RETURNN's BatchingIterDataPipe gives it), bounded by the
        ``packed_batch_size`` entry of its name."""
        if not self.packed_batch_cost:
            return []
        for name, cost in self.packed_batch_cost.items():
            if not callable(cost) or name not in limits:
                raise ConfigError(
                    f"packed_batch_cost[{name!r}] = {cost!r}: RETURNN needs a function of a sequence's lengths and an "
                    f"explicit packed_batch_size[{name!r}] entry (its limit; RETURNN stops without one: "
                    f"AssertionError). Give packed_batch_size = {{{name!r}: N, ...}}."
                )
        info = self.dataset.key_info()
        lengths = {}
        for key, entry in info.items():
            if entry["shape"]:
                first = entry["shape"][0]
                lengths[key] = self.dataset.lengths_of(key) if first is None else np.full(self.dataset.num_seqs, first)
        per_seq = [
            numbers_dict({key: int(value[i]) for key, value in lengths.items()}) for i in range(self.dataset.num_seqs)
        ]
        return [
            (np.array([cost(seq) for seq in per_seq]), limits[name]) for name, cost in self.packed_batch_cost.items()
        ]

    def _check_limit_keys(self) -> None:
        """ConfigError if a min_seq_length / max_seq_length dict names a key neither the dataset nor extern_data has
        (a typo would leave every sequence in, silently), as batch_size refuses a dict of unknown keys."""
        known = set(self.dataset.key_info()) | set(self.extern_data)
        for option, limit in zip(("min_seq_length", "max_seq_length"), self.seq_length_limits, strict=True):
            unknown = sorted(set(limit) - known, key=str) if isinstance(limit, dict) else []
            if unknown:
                raise ConfigError(
                    f"{option} = {limit!r} names {', '.join(map(repr, unknown))}, which is no key of dataset "
                    f"{self.option!r} ({', '.join(sorted(self.dataset.key_info())) or 'none'}) or of extern_data. "
                    f"Name the keys whose lengths it limits, or give one number for all."
                )

    def _variable_keys(self) -> list[str]:
        return [key for key, info in self.dataset.key_info().items() if None in info["shape"]]

    def within_length_limits(self, order: np.ndarray) -> np.ndarray:
        """``order`` without the sequences outside ``min_seq_length`` / ``max_seq_length`` (RETURNN's filter: a
        number limits every key, a dict the keys it names)."""
        if self.seq_length_limits == (None, None):
            return order
        kept = within_limits(self.dataset, self.seq_length_limits)  # per call: DistributeFilesDataset changes files
        if not kept.all() and not self._left_out_logged:
            self._left_out_logged = True
            log.v4(f"Dataset {self.option}: {int((~kept).sum())} of {len(kept)} sequences left out by their length.")
        return order[kept[order]]

    def numpy_batch(self, indices: np.ndarray, epoch: int | None = None) -> dict[str, np.ndarray]:
        """The declared keys of sequences ``indices`` (of ``epoch``'s plan; by default the latest plan's),
        converted to the declared dtypes and checked."""
        if epoch is not None:
            self.dataset.use_epoch(epoch)
        raw = self.dataset.get_batch(indices)
        batch = {}
        for key, declared in self.extern_data.items():
            array = raw[key] if key in self.one_hot else raw[key].astype(declared.dtype, copy=False)
            classes = self.one_hot.get(key, declared.sparse_dim)
            checked = key in self.labels_checked
            if classes is not None and not checked and array.size and (array.min() < 0 or array.max() >= classes):
                if key in self.one_hot or bad_labels(array, classes).any():  # no one-hot vector for an ignored label
                    self._raise_label_error(
                        key, array, raw.get(key + ":seq_len"), indices, classes, key in self.one_hot
                    )
            if key in self.one_hot:
                array = np.eye(classes, dtype=declared.dtype)[array]
                if declared.variable:  # padding frames are all-zero vectors, not class 0
                    array[np.arange(array.shape[1]) >= raw[key + ":seq_len"][:, None]] = 0
            batch[key] = array
            if declared.variable:
                batch[key + ":seq_len"] = raw[key + ":seq_len"]
        return batch

    def _raise_label_error(self, key, array, seq_lens, indices, sparse_dim, one_hot) -> None:
        for row, seq_index in enumerate(indices):
            values = array[row] if seq_lens is None else array[row, : seq_lens[row]]
            bad = (values < 0) | (values >= sparse_dim) if one_hot else bad_labels(values, sparse_dim)
            if bad.any():
                where = f"dataset {self.option!r} ({self.dataset.name})"
                raise DataError(label_error(key, int(values[bad].flat[0]), int(seq_index), sparse_dim, where))

    def tensor_batch(self, indices: np.ndarray, epoch: int | None = None) -> dict[str, torch.Tensor]:
        """Like ``numpy_batch``, as CPU tensors (floating-point ones in ``float_dtype`` when it is set)."""
        return self.as_tensors(self.numpy_batch(indices, epoch))

    def as_tensors(self, arrays: dict[str, np.ndarray]) -> dict[str, torch.Tensor]:
        """A batch of ``numpy_batch``'s arrays as CPU tensors, as ``tensor_batch`` gives them."""
        batch = {key: torch.from_numpy(np.ascontiguousarray(a)) for key, a in arrays.items()}
        if self.float_dtype is not None:
            for key, tensor in batch.items():
                if tensor.is_floating_point():
                    batch[key] = tensor.to(self.float_dtype)
        return batch

    def first_batch(self, epoch: int) -> dict[str, torch.Tensor] | None:
        """The first planned batch of ``epoch`` on the device (None: the epoch plans no batch)."""
        plan = self.plan(epoch)
        return next(iter(self.iterate(plan[:1])))[1] if plan else None

    def iterate(self, plan: list[np.ndarray]) -> Iterator[tuple[np.ndarray, dict[str, torch.Tensor]]]:
        """Yield each planned batch on the device, loading in worker processes if configured.

        ``plan`` is (part of) the latest plan: its epoch's sequences are read even if a check plans another epoch
        while this one runs (``DistributeFilesDataset`` holds other sequences in each sub-epoch).
        """
        return self._iterate(plan, self._last_plan[0] if self._last_plan is not None else 1)

    def _iterate(self, plan: list[np.ndarray], epoch: int) -> Iterator[tuple[np.ndarray, dict[str, torch.Tensor]]]:
        # Asynchronous on any accelerator: torch stages a pageable source itself, so the copy is safe either way.
        non_blocking = is_accelerator(self.device)
        if self.dataloader_opts.get("num_workers", 0) > 0:
            opts = dict(self.dataloader_opts)
            if self.reseeded:
                opts["worker_init_fn"] = functools.partial(worker_init, self.reseeded, opts.get("worker_init_fn"))
            loader = torch.utils.data.DataLoader(
                _PlannedBatches(self, plan, epoch), batch_size=None, shuffle=False, **opts
            )
            source = zip(plan, loader, strict=True)
        else:
            source = ((indices, self.tensor_batch(indices, epoch)) for indices in plan)
        for indices, batch in source:
            yield indices, to_device(batch, self.device, non_blocking=non_blocking)


def to_device(batch: dict[str, torch.Tensor], device: torch.device, non_blocking: bool = False) -> dict:
    """The batch's data on ``device``; the ``:seq_len`` lengths stay on the CPU, as in RETURNN:
    pack_padded_sequence wants them there, and reading them (max length, masks) costs no device sync."""
    if device.type == "cpu":  # the batch is there already: a .to() per key would cost a dispatch each step
        for key, t in batch.items():
            if key.endswith(":seq_len"):
                mark_host_side(t)
        return batch
    return {
        key: mark_host_side(t) if key.endswith(":seq_len") else t.to(device, non_blocking=non_blocking)
        for key, t in batch.items()
    }


class _PlannedBatches(torch.utils.data.Dataset):
    """The batch plan as a map-style torch dataset, one item per batch, for DataLoader workers."""

    def __init__(self, loader: BatchLoader, plan: list[np.ndarray], epoch: int):
        self.loader = loader
        self.plan = plan
        self.epoch = epoch

    def __len__(self) -> int:
        return len(self.plan)

    def __getitem__(self, i: int) -> dict[str, torch.Tensor]:
        return self.loader.tensor_batch(self.plan[i], self.epoch)


def within_limits(dataset: Any, limits: tuple[Any, Any]) -> np.ndarray:
    """Which sequences of ``dataset`` are within RETURNN's ``(min_seq_length, max_seq_length)``: a number limits
    every key (the sequence's longest), a dict the variable-length keys it names."""
    variable = [key for key, info in dataset.key_info().items() if None in info["shape"]]
    kept = np.ones(dataset.num_seqs, dtype=bool)
    for limit, too_far in zip(limits, (np.less, np.greater), strict=True):
        if isinstance(limit, dict):
            for key, value in limit.items():
                if key in variable:
                    kept &= ~too_far(dataset.lengths_of(key), value)
        elif limit is not None:
            kept &= ~too_far(dataset.seq_lengths(), limit)
    return kept


def numbers_dict(lengths: dict[str, int]) -> Any:
    """A sequence's lengths as RETURNN's cost functions get them: RETURNN's NumbersDict where RETURNN is installed,
    else the dict."""
    try:
        from returnn.util.basic import NumbersDict
    except ImportError:
        return dict(lengths)
    return NumbersDict(dict(lengths))


def interleaved(plans: list[list[np.ndarray]]) -> list[np.ndarray]:
    """The workers' batches as a DataLoader over an iterable dataset yields them: one of each worker in turn, a
    worker that has none left skipped."""
    return [plan[i] for i in range(max(map(len, plans), default=0)) for plan in plans if i < len(plan)]


def shuffled_in_blocks(batches: list[np.ndarray], buffer_size: int, seed: int, epoch: int) -> list[np.ndarray]:
    """RETURNN's ``online_shuffle_batches`` (``ShufflingDataPipe``): the batches in consecutive blocks of
    ``buffer_size``, each block in a random order (here seeded by ``seed`` and the epoch, so that a resumed epoch
    has the same plan; RETURNN draws its seed from torch's generator)."""
    rng = np.random.default_rng([seed, epoch, 1])
    shuffled = []
    for start in range(0, len(batches), buffer_size):
        block = batches[start : start + buffer_size]
        shuffled += [block[i] for i in rng.permutation(len(block))]
    return shuffled
