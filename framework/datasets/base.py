"""The dataset interface: a finite list of sequences, each a dict of numpy arrays.

A non-sequence entry (an MNIST image) is a sequence of length 1 for batching purposes, as in
RETURNN. Subclasses implement ``num_seqs``, ``get_seq`` and ``key_info``; ``get_batch`` and
``seq_lengths`` have generic implementations that in-memory datasets replace with fast ones.
"""

from __future__ import annotations

import functools
import random
from collections.abc import Callable
from typing import Any

import numpy as np

from framework.base import log
from framework.base.errors import ConfigError, DataError
from framework.datasets.legacy_options import check_legacy_parameters
from framework.datasets.seq_lists import read_seq_lens, read_seq_list
from framework.datasets.seq_order import ORDERING_FAMILIES, parse_ordering, returnn_order, returnn_seed

SEQ_ORDERINGS = ORDERING_FAMILIES

# RETURNN's get_fwd_compat_kwargs draws the keyword's name from a generator of its own: so here, leaving the
# run's random generators as they are
_FWD_COMPAT = random.Random()


class Dataset:
    """Base class of all datasets.

    :param seq_ordering: "default" (dataset order), "random" (reshuffled every epoch), "sorted",
        "sorted_reverse" (by length), or, as in RETURNN, "laplace:N" (N random buckets, each sorted by
        length, alternating direction: little padding, still shuffled), "laplace:.N" (buckets of
        about N sequences), "sort_bin_shuffle[_x2][:N|:.N]", "random_sample", "reverse", "default_every_n:N", each
        drawing one with an optional ":nth" (the same draw for nth epochs); see ``seq_order``. None: "random" for
        the train dataset of a config for this framework, "default" otherwise. A function, as RETURNN takes it:
        called with ``epoch=`` the (sub-)epoch (and RETURNN's forward-compatibility keyword) each time the epoch's
        order is computed, it returns one of these strings.
    :param partition_epoch: split each pass over the data into this many sub-epochs.
    :param random_seed: shuffling seed; the engine passes the config's ``random_seed``. None: RETURNN's orders, draw
        for draw (what a RETURNN config gets): ``numpy.random.RandomState`` seeded with the full epoch plus
        ``random_seed_offset`` (or ``fixed_random_seed``), as RETURNN's ``get_seq_order_for_epoch``.
    :param fixed_random_seed: RETURNN's parameter: shuffle with this seed, whatever ``random_seed`` is (with
        ``random_seed`` None the same order every epoch, as in RETURNN).
    :param repeat_epoch: RETURNN's parameter: each (sub-)epoch goes through its sequences this many times.
    :param seq_list_filter_file: RETURNN's parameter: only the sequences whose tags this file lists (a text file,
        one tag per line, or a pickled list; optionally gzipped), kept where they are in each (sub-)epoch's order.
    :param unique_seq_tags: RETURNN's parameter: a tag's later sequences left out of an epoch's order.
    :param seq_order_seq_lens_file: RETURNN's parameter: what "sorted" and "laplace" sort by, from a Python dict
        literal ``{tag: length}`` (optionally gzipped), instead of the dataset's own lengths.
    :param random_seed_offset: RETURNN's parameter: added to the shuffling seed (``fixed_random_seed`` wins).
    :param legacy: RETURNN's TensorFlow-era parameters (``window``, ``chunking``, ...; see ``legacy_options``) and
        ``estimated_num_seqs``: accepted at their defaults.
    """

    #: True for a dataset that gives each rank of a torch.distributed run only its own share (its plan is that
    #: rank's batches, not to be split again; see ``BatchLoader.plan``).
    sharded_by_rank = False

    #: What RETURNN's class of this name does with its ``window`` parameter (``context_window``): "stacks" the frames
    #: of its ``data`` ("stacks one-hot": of its one-hot ``data``, given as ids here), "ignores" it, or None: RETURNN
    #: stops on it, or the class is no RETURNN class (then a window other than 1 is refused).
    returnn_window: str | None = None

    #: Whether RETURNN's class of this name shards its sequences over DataLoader workers (``supports_sharding``) and
    #: ``get_seq_order``'s ``shard`` gives RETURNN's shard here (torch_dataloader_shard_workers).
    returnn_worker_shards = False

    #: RETURNN's ``supports_seq_order_sorting`` of its class of this name: RETURNN's forward run (``sort_dataset``)
    #: orders such a dataset "sorted_reverse" (longest first). False, as RETURNN's base class, where its class does not
    #: sort (the generated and combining datasets) or the class is this framework's own.
    returnn_sortable = False

    #: Whether RETURNN's class of this name orders a dev/eval dataset by length when its dict sets no ``seq_ordering``
    #: (RETURNN's ``__main__.load_data`` gives it "sorted", ``Dataset.get_default_kwargs_eval``). False where RETURNN's
    #: class ignores "sorted" (its generated datasets: the default order) or stops on it (ConcatDataset,
    #: PostprocessingDataset, DistributeFilesDataset: here the default order).
    returnn_eval_sorted = True

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "get_seq_order" in cls.__dict__:
            cls.get_seq_order = _recording_epoch(cls.__dict__["get_seq_order"])

    def __init__(
        self,
        *,
        seq_ordering: str | None = None,
        partition_epoch: int = 1,
        random_seed: int | None = 0,
        fixed_random_seed: int | None = None,
        repeat_epoch: int = 1,
        seq_list_filter_file: str | None = None,
        unique_seq_tags: bool = False,
        seq_order_seq_lens_file: str | None = None,
        random_seed_offset: int = 0,
        estimated_num_seqs: int | None = None,
        window: int = 1,
        context_window: Any = None,
        chunking: Any = None,
        min_chunk_size: int = 0,
        chunking_variance: float = 0,
        shuffle_frames_of_nseqs: int = 0,
    ):
        if seq_ordering is not None and not callable(seq_ordering) and not valid_seq_ordering(seq_ordering):
            raise ConfigError(
                f"{type(self).__name__}: seq_ordering {seq_ordering!r} is not one of {', '.join(SEQ_ORDERINGS)} (or a "
                f"function of the epoch returning one, as RETURNN takes it)."
            )
        if partition_epoch < 1:
            raise ConfigError(f"{type(self).__name__}: partition_epoch must be >= 1, got {partition_epoch}.")
        self.seq_ordering = seq_ordering
        self.partition_epoch = partition_epoch
        #: RETURNN's seeding and draws (random_seed None); else this framework's, seeded with the run's random_seed
        self.returnn_seeding = random_seed is None
        self.random_seed_offset = random_seed_offset
        self.fixed_random_seed = fixed_random_seed
        self.random_seed = (random_seed or 0) + random_seed_offset if fixed_random_seed is None else fixed_random_seed
        self.name = type(self).__name__
        legacy = {"window": window, "context_window": context_window, "chunking": chunking}
        legacy.update(min_chunk_size=min_chunk_size, chunking_variance=chunking_variance)
        check_legacy_parameters(self.name, {**legacy, "shuffle_frames_of_nseqs": shuffle_frames_of_nseqs})
        self.unique_seq_tags = unique_seq_tags
        self.seq_order_seq_lens_file = seq_order_seq_lens_file
        self._file_lengths: np.ndarray | None = None
        if not isinstance(repeat_epoch, int) or repeat_epoch < 1:
            raise ConfigError(f"{type(self).__name__}: repeat_epoch must be an int >= 1, got {repeat_epoch!r}.")
        if repeat_epoch > 1 and partition_epoch > 1:
            raise ConfigError(
                f"{type(self).__name__}: partition_epoch = {partition_epoch} and repeat_epoch = {repeat_epoch} together: "
                f"RETURNN prohibits combining them (one shrinks the epoch, the other grows it). Keep one."
            )
        self.repeat_epoch = repeat_epoch
        self.seq_list_filter_file = seq_list_filter_file
        self.tags_filter = (
            None
            if seq_list_filter_file is None
            else set(read_seq_list(seq_list_filter_file, self.name, "seq_list_filter_file"))
        )

    # -- to implement -------------------------------------------------------------------------
    @property
    def num_seqs(self) -> int:
        """Number of sequences in one full pass."""
        raise NotImplementedError

    def key_info(self) -> dict[str, dict[str, Any]]:
        """``{key: {"shape": (None, 9), "dtype": "float32", "sparse_dim": None}}`` per data key.

        ``shape`` excludes the batch axis; None marks a variable-length axis.
        """
        raise NotImplementedError

    def get_seq(self, index: int) -> dict[str, np.ndarray]:
        """Sequence ``index``: one array per key, shaped like ``key_info`` (without batch axis)."""
        raise NotImplementedError

    # -- generic implementations ----------------------------------------------------------------
    def seq_tag(self, index: int) -> str:
        """The sequence's name (RETURNN's sequence tag; its default is "seq-<index>"): ``MetaDataset`` matches the
        sequences of its datasets by it, and ``task = "forward"`` writes it."""
        return f"seq-{index}"

    def use_epoch(self, epoch: int) -> None:
        """Make ``get_seq``/``get_batch`` read the sequences of (sub-)epoch ``epoch``.

        Nothing to do for a dataset that holds the same sequences every epoch; ``DistributeFilesDataset`` holds
        other files in each sub-epoch. The loader calls it before it reads a batch of an epoch's plan.
        """

    def seq_lengths(self) -> np.ndarray:
        """Frames per sequence (the longest variable axis; 1 for fixed-shape data), for batching.

        Computed once by reading every sequence, then cached: override it where the lengths are known.
        """
        if getattr(self, "_read_lengths", None) is None:
            variable = [k for k, info in self.key_info().items() if None in info["shape"]]
            lengths = np.ones(self.num_seqs, dtype=np.int64)
            if variable:
                for i in range(self.num_seqs):
                    seq = self.get_seq(i)
                    lengths[i] = max(seq[k].shape[0] for k in variable)
            self._read_lengths = lengths
        return self._read_lengths

    def lengths_of(self, key: str) -> np.ndarray:
        """The length of variable-length ``key`` in each sequence (RETURNN's per-key ``batch_size`` and
        ``max_seq_length``). Computed once by reading every sequence, then cached: override it where known."""
        cache = self.__dict__.setdefault("_read_key_lengths", {})
        if key not in cache:
            cache[key] = np.array([self.get_seq(i)[key].shape[0] for i in range(self.num_seqs)], dtype=np.int64)
        return cache[key]

    def order_lengths(self) -> np.ndarray:
        """The lengths that "sorted" and "laplace" orderings sort by: ``seq_lengths`` unless a dataset sorts by
        another measure, as RETURNN's ``OggZipDataset`` sorts by the durations in its index."""
        return self.seq_lengths()

    def get_batch(self, indices: np.ndarray) -> dict[str, np.ndarray]:
        """Collate the sequences ``indices`` into padded arrays plus ``key:seq_len`` lengths."""
        seqs = [self.get_seq(int(i)) for i in indices]
        return collate(seqs, self.key_info())

    def get_seq_order(self, epoch: int, shard: tuple[int, int] = (0, 1)) -> np.ndarray:
        """The sequence indices of (sub-)epoch ``epoch`` (1-based), in the order they are used.

        ``shard`` (index, count): RETURNN's shard of a DataLoader worker (``Dataset.set_sharding``), for a class with
        ``returnn_worker_shards``: the full epoch's order cut into partition_epoch x count pieces, the sub-epoch's
        count pieces one per shard (``_apply_partition_epoch_and_sharding``); (0, 1) is the whole sub-epoch.
        """
        full_epoch, part = divmod(epoch - 1, self.partition_epoch)
        order = self._full_epoch_order(full_epoch + 1)
        index, count = shard
        return self.filtered(np.array_split(order, self.partition_epoch * count)[part * count + index])

    def filtered(self, order: np.ndarray) -> np.ndarray:
        """A (sub-)epoch's ``order`` with RETURNN's ``repeat_epoch`` and ``seq_list_filter_file`` applied, in RETURNN's
        order of the two: a dataset that computes its order itself ends its ``get_seq_order`` with this."""
        if self.repeat_epoch > 1:
            order = np.tile(order, self.repeat_epoch)
        if self.tags_filter is None:
            return order
        kept = order[[self.seq_tag(int(i)) in self.tags_filter for i in order]] if len(order) else order
        if len(kept) == 0:
            example = sorted(self.tags_filter)[:3]
            raise DataError(
                f"{self.name}: no sequence of this epoch is listed in seq_list_filter_file {self.seq_list_filter_file!r} "
                f"(it lists e.g. {example}; the dataset has e.g. {[self.seq_tag(int(i)) for i in order[:3]]}). The "
                f"file must list the dataset's tags, one per line."
            )
        return kept.astype(np.int64)

    def _full_epoch_order(self, full_epoch: int) -> np.ndarray:
        return self.unique(self.ordered(self.num_seqs, self.sort_lengths, full_epoch))

    def sort_lengths(self) -> np.ndarray:
        """What orderings sort by: ``seq_order_seq_lens_file``'s lengths where given, else ``order_lengths()``."""
        if self.seq_order_seq_lens_file is None:
            return self.order_lengths()
        if self._file_lengths is None:
            lengths = read_seq_lens(self.seq_order_seq_lens_file, self.name)
            tags = [self.seq_tag(i) for i in range(self.num_seqs)]
            missing = [tag for tag in tags if tag not in lengths]
            if missing:
                raise ConfigError(
                    f"{self.name}: seq_order_seq_lens_file {self.seq_order_seq_lens_file!r} has no length for "
                    f"{missing[0]!r} ({len(missing)} of {len(tags)} tags missing); it must give every sequence's."
                )
            self._file_lengths = np.array([lengths[tag] for tag in tags])
        return self._file_lengths

    def unique(self, order: np.ndarray) -> np.ndarray:
        """``order`` without a tag's later sequences, where ``unique_seq_tags`` asks for that (as RETURNN)."""
        if not self.unique_seq_tags:
            return order
        seen: set[str] = set()
        kept = [i for i in order if not (self.seq_tag(int(i)) in seen or seen.add(self.seq_tag(int(i))))]
        return np.array(kept, dtype=np.int64)

    def ordered(self, n: int, lengths_of_all: Callable[[], np.ndarray], full_epoch: int) -> np.ndarray:
        """The positions 0 .. n - 1 in this dataset's ``seq_ordering`` for ``full_epoch``, where ``lengths_of_all()``
        gives the n lengths that sorting uses (called only by orderings that sort): a dataset that combines others
        orders its epoch's sequences with it."""
        ordering = self.ordering_name()
        if self.returnn_seeding:  # RETURNN's generator and seed (Dataset._get_random_seed_for_epoch)
            offset, fixed = self.random_seed_offset, self.fixed_random_seed
            return returnn_order(
                ordering,
                n,
                lengths_of_all,
                lambda nth: np.random.RandomState(returnn_seed(full_epoch, nth, offset, fixed)),
            )
        # This framework's own configs keep their orders: "random" and "laplace:N" as they always were drawn; the
        # other orderings are RETURNN's, drawn from the same generator.
        if not (ordering == "random" or (ordering.startswith("laplace:") and ordering.count(":") == 1)):
            seed = self.random_seed
            return returnn_order(
                ordering, n, lengths_of_all, lambda nth: np.random.default_rng([seed, (full_epoch - 1) // nth + 1])
            )
        rng = np.random.default_rng([self.random_seed, full_epoch])
        if ordering == "random":
            return rng.permutation(n)
        lengths = lengths_of_all()
        count = ordering.split(":")[1]
        buckets = max(n // int(count[1:]), 2) if count.startswith(".") else int(count)
        order = rng.permutation(n)
        chunks = np.array_split(order, min(buckets, max(n, 1)))
        sorted_chunks = []
        for k, chunk in enumerate(chunks):
            chunk = chunk[np.argsort(lengths[chunk], kind="stable")]
            sorted_chunks.append(chunk if k % 2 == 0 else chunk[::-1])
        return np.concatenate(sorted_chunks) if sorted_chunks else order

    def ordering_name(self) -> str:
        """The ``seq_ordering`` string of the epoch being ordered: a function's value for that (sub-)epoch, called as
        RETURNN's ``Dataset.get_seq_order_for_epoch`` calls it (``epoch=`` and a randomly named keyword, so that a
        function without ``**kwargs`` fails as it does in RETURNN); "default" when none is set."""
        ordering = self.seq_ordering
        if not callable(ordering):
            return ordering or "default"
        epoch = self.__dict__.get("_ordering_epoch", 1)
        name = getattr(ordering, "__name__", repr(ordering))
        try:
            value = ordering(epoch=epoch, **{f"__fwd_compat_random_arg_{_FWD_COMPAT.randrange(100):03}": None})
        except TypeError as exc:
            if "argument" not in str(exc):  # the function's own error, not how it was called
                raise
            raise ConfigError(
                f"{self.name}: seq_ordering function {name!r} cannot be called as RETURNN calls it, with epoch= and "
                f"**kwargs ({exc}): define it as def {name}(*, epoch, **_kwargs) returning the epoch's ordering "
                f"string (RETURNN stops on it too)."
            ) from None
        if not isinstance(value, str) or not valid_seq_ordering(value):
            raise ConfigError(
                f"{self.name}: seq_ordering function {name!r} returned {value!r} for "
                f"epoch {epoch}; it must return one of {', '.join(SEQ_ORDERINGS)} (RETURNN stops on it too: a "
                f"TypeError for anything but a str)."
            )
        return value

    def __repr__(self) -> str:
        return f"<{self.name}: {self.num_seqs} seqs>"


def _recording_epoch(get_seq_order: Callable[..., np.ndarray]) -> Callable[..., np.ndarray]:
    """``get_seq_order`` that first notes its (sub-)epoch on the dataset: a ``seq_ordering`` function gets it, as
    RETURNN passes the epoch of ``init_seq_order`` (not the full epoch the order is drawn for)."""

    @functools.wraps(get_seq_order)
    def recording(self: Dataset, epoch: int, *args: Any, **kwargs: Any) -> np.ndarray:
        self.__dict__["_ordering_epoch"] = epoch
        return get_seq_order(self, epoch, *args, **kwargs)

    return recording


Dataset.get_seq_order = _recording_epoch(Dataset.get_seq_order)  # type: ignore[method-assign]


def valid_seq_ordering(ordering: Any) -> bool:
    """Whether ``ordering`` is one of ``SEQ_ORDERINGS`` (RETURNN's orderings, ``seq_order.parse_ordering``)."""
    return parse_ordering(ordering) is not None


def collate(seqs: list[dict[str, np.ndarray]], key_info: dict[str, dict[str, Any]]) -> dict[str, np.ndarray]:
    """Stack sequences into batch arrays; variable-length keys are zero-padded and get ``key:seq_len``."""
    batch: dict[str, np.ndarray] = {}
    for key, info in key_info.items():
        arrays = [seq[key] for seq in seqs]
        if None not in info["shape"]:
            batch[key] = np.stack(arrays)
            continue
        batch[key], batch[key + ":seq_len"] = pad_sequences(arrays)
    return batch


def pad_sequences(arrays: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """Zero-pad arrays [T_i, ...] along axis 0 into [B, max T, ...]; also return the lengths."""
    lengths = np.array([a.shape[0] for a in arrays], dtype=np.int64)
    padded = np.zeros((len(arrays), int(lengths.max(initial=0))) + arrays[0].shape[1:], dtype=arrays[0].dtype)
    for i, a in enumerate(arrays):
        padded[i, : a.shape[0]] = a
    return padded, lengths


_noted: set[str] = set()


def note_no_cache_manager(owner: str, paths: list[str]) -> None:
    """Say once per dataset class that ``use_cache_manager`` reads the files in place."""
    if owner not in _noted:
        _noted.add(owner)
        log.v3(
            f"{owner}: use_cache_manager=True: there is no cache manager here; reading {paths[0]}"
            f"{f' and {len(paths) - 1} more' if len(paths) > 1 else ''} in place."
        )
