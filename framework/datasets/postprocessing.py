"""RETURNN's ``PostprocessingDataset``: another dataset's sequences passed through the config's functions.

``map_seq(data, *, epoch, seq_idx, rng, **kwargs) -> data`` changes one sequence (augmentation, feature changes);
``map_seq_stream(iterator, *, epoch, rng, **kwargs) -> iterator`` sees the whole stream and may merge, split,
drop or reorder sequences. ``data`` is a tensor dict as RETURNN gives it: ``data.data[key].raw_tensor`` (also
``data[key]``) is a sequence's numpy array, and the entries ``seq_tag``, ``seq_idx`` and ``complete_frac`` describe
it. ``rng`` is RETURNN's: one ``numpy.random.RandomState`` per epoch, seeded with the (full) epoch's number (or
``fixed_random_seed``), drawn from in the order of the stream; so the results equal RETURNN's for the same
functions, random ones too.

To give exactly that, a (sub-)epoch's sequences are computed when the epoch starts, in the wrapped dataset's order,
and held in memory until the next: a dataset whose processed sub-epoch does not fit in memory needs the wrapped
dataset's ``partition_epoch``. The wrapped dataset orders the sequences; this dataset's order is the stream's.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from framework.base.errors import ConfigError, DataError
from framework.datasets.base import Dataset
from framework.datasets.postprocessing_helpers import LaplaceOrdering, Sequential
from framework.datasets.registry import init_dataset
from framework.datasets.seq_tensor_dict import SeqTensor, SeqTensorDict

_META = ("seq_tag", "seq_idx", "complete_frac")


class PostprocessingDataset(Dataset):
    """A dataset's sequences through ``map_seq`` or ``map_seq_stream`` (one of them).

    :param dataset: the wrapped dataset (a dataset dict); it orders the sequences.
    :param map_seq: ``(data, *, epoch, seq_idx, rng, **kwargs) -> data``.
    :param map_seq_stream: ``(iterator, *, epoch, rng, **kwargs) -> iterator`` of tensor dicts.
    :param map_outputs: the keys the functions give, when they change keys, shapes or dtypes:
        ``{key: {"dtype": ..., "shape": (None, 40), "sparse_dim": K}}`` (RETURNN's ``dim``/``dims`` also read);
        None: the wrapped dataset's keys.
    :param map_seq_stream_preserves_num_seqs: RETURNN's check that the stream keeps the number of sequences.
    :param buf_size: RETURNN's prefetch per worker (no effect here); ``num_workers`` > 0 is refused: wrap this
        dataset in ``MultiProcDataset`` for parallel loading.
    :param fixed_random_seed: seed ``rng`` with this in every epoch; ``random_seed_offset``: added to the epoch.
    """

    returnn_window = "ignores"  # what RETURNN's class does with window (context_window.py)
    returnn_eval_sorted = False  # RETURNN stops on a dev/eval "sorted" (its only order here: the default)

    def __init__(
        self,
        *,
        dataset: Any,
        map_seq: Callable[..., Any] | None = None,
        map_seq_stream: Callable[..., Any] | None = None,
        map_outputs: dict[str, Any] | None = None,
        map_seq_stream_preserves_num_seqs: bool | None = None,
        buf_size: int = 1,
        num_workers: int = 0,
        seq_ordering: str | None = None,
        fixed_random_seed: int | None = None,
        random_seed_offset: int = 0,
        **kwargs: Any,
    ):
        if seq_ordering not in (None, "default"):
            raise ConfigError(
                f"PostprocessingDataset: seq_ordering = {seq_ordering!r}; the wrapped dataset orders the sequences "
                f"(as RETURNN requires): give seq_ordering in 'dataset'."
            )
        super().__init__(seq_ordering="default", fixed_random_seed=fixed_random_seed, **kwargs)
        if (map_seq is None) == (map_seq_stream is None):
            raise ConfigError(
                "PostprocessingDataset: give map_seq or map_seq_stream (exactly one, as RETURNN requires)."
            )
        if map_seq is not None and map_seq_stream_preserves_num_seqs is not None:
            raise ConfigError("PostprocessingDataset: map_seq_stream_preserves_num_seqs goes with map_seq_stream only.")
        if num_workers:
            raise ConfigError(
                f"PostprocessingDataset: num_workers = {num_workers}: RETURNN's post-processing worker processes are not "
                f"available here. Wrap it instead: {{'class': 'MultiProcDataset', 'dataset': {{'class': "
                f"'PostprocessingDataset', ...}}, 'num_workers': {num_workers}}}."
            )
        if buf_size < 1:
            raise ConfigError(f"PostprocessingDataset: buf_size must be >= 1, got {buf_size}.")
        for name, function in (("map_seq", map_seq), ("map_seq_stream", map_seq_stream)):
            if function is not None:
                _check_signature(function, name)
        self.map_seq, self.map_seq_stream = map_seq, map_seq_stream
        if map_seq_stream_preserves_num_seqs is None and map_seq_stream is not None:
            map_seq_stream_preserves_num_seqs = getattr(map_seq_stream, "preserves_num_seqs", None)
        self.preserves_num_seqs = map_seq is not None or bool(map_seq_stream_preserves_num_seqs)
        self.data_seed, self.random_seed_offset = fixed_random_seed, random_seed_offset
        self.dataset = init_dataset(
            dataset, option="PostprocessingDataset dataset", random_seed=self.random_seed, parent=self
        )
        self._in_info = self.dataset.key_info()
        self._info = self._in_info if map_outputs is None else _outputs_info(map_outputs)
        self._epoch: int | None = None
        self._seqs: list[dict[str, np.ndarray]] = []
        self._tags: list[str] = []
        self.name = f"PostprocessingDataset({self.dataset.name})"

    # -- the dataset interface ---------------------------------------------------------------------------------
    @property
    def num_seqs(self) -> int:
        self._ensure(self._epoch or 1)
        return len(self._seqs)

    def key_info(self) -> dict[str, dict[str, Any]]:
        return {key: dict(value) for key, value in self._info.items()}

    def get_seq_order(self, epoch: int) -> np.ndarray:
        self._ensure(epoch)
        return self.filtered(np.arange(len(self._seqs)))

    def use_epoch(self, epoch: int) -> None:
        self._ensure(epoch)

    def seq_tag(self, index: int) -> str:
        return self._tags[index]

    def get_seq(self, index: int) -> dict[str, np.ndarray]:
        return self._seqs[index]

    def seq_lengths(self) -> np.ndarray:
        variable = [k for k, info in self._info.items() if None in info["shape"]]
        lengths = [max([len(seq[k]) for k in variable], default=1) for seq in self._seqs]
        return np.array(lengths, dtype=np.int64)

    def lengths_of(self, key: str) -> np.ndarray:
        return np.array([len(seq[key]) for seq in self._seqs], dtype=np.int64)

    # -- the stream ------------------------------------------------------------------------------------------
    def epoch_seed(self, epoch: int) -> int:
        """RETURNN's seed of ``rng`` in (sub-)epoch ``epoch``."""
        if self.data_seed is not None:
            return self.data_seed
        return (epoch - 1) // self.partition_epoch + 1 + self.random_seed_offset

    def _ensure(self, epoch: int) -> None:
        """Compute the sequences of ``epoch`` (once; they stay until another epoch is asked for)."""
        if self._epoch == epoch:
            return
        rng = np.random.RandomState(self.epoch_seed(epoch))
        order = self.dataset.get_seq_order(epoch)
        self.dataset.use_epoch(epoch)
        stream = self._input_stream(order)
        if self.map_seq is not None:
            stream = (self._mapped(data, epoch, rng) for data in stream)
        else:
            stream = self.map_seq_stream(stream, epoch=epoch, rng=rng)
            if not isinstance(stream, Iterator):
                raise DataError(
                    f"PostprocessingDataset: map_seq_stream returned a {type(stream).__name__}, not an iterator of "
                    f"tensor dicts (RETURNN requires an iterator: write it as a generator, with yield)."
                )
        seqs, tags = [], []
        for index, data in enumerate(stream):
            seq, tag = self._checked(data, index)
            seqs.append(seq)
            tags.append(tag)
        if self.preserves_num_seqs and len(seqs) != len(order):
            raise DataError(
                f"PostprocessingDataset: map_seq_stream gave {len(seqs)} sequences for {len(order)} (epoch {epoch}), "
                f"but map_seq_stream_preserves_num_seqs says it keeps their number."
            )
        if not seqs:
            raise DataError(f"PostprocessingDataset: epoch {epoch} has no sequences after post-processing.")
        self._epoch, self._seqs, self._tags = epoch, seqs, tags

    def _input_stream(self, order: np.ndarray) -> Iterator[SeqTensorDict]:
        for position, index in enumerate(order):
            seq = self.dataset.get_seq(int(index))
            data = SeqTensorDict(
                {
                    key: SeqTensor(key, seq[key], info["dtype"], info["sparse_dim"])
                    for key, info in self._in_info.items()
                }
            )
            data.data["complete_frac"] = SeqTensor("complete_frac", np.array((position + 1) / len(order), np.float32))
            data.data["seq_idx"] = SeqTensor("seq_idx", np.array(position, dtype=np.int32))
            data.data["seq_tag"] = SeqTensor("seq_tag", np.array(self.dataset.seq_tag(int(index))))
            yield data

    def _mapped(self, data: SeqTensorDict, epoch: int, rng: np.random.RandomState) -> Any:
        meta = {key: data.data[key] for key in _META}
        position = int(meta["seq_idx"].raw_tensor)
        out = self.map_seq(data, epoch=epoch, seq_idx=position, rng=rng)
        if out is None or not hasattr(out, "data"):
            raise DataError(
                f"PostprocessingDataset: map_seq returned {type(out).__name__} for sequence {position}, not the tensor "
                f"dict (return the data it was given, changed)."
            )
        for key, tensor in meta.items():  # as RETURNN: map_seq keeps the sequence, whatever it does to the entries
            out.data.setdefault(key, tensor)
        return out

    def _checked(self, data: Any, index: int) -> tuple[dict[str, np.ndarray], str]:
        entries = getattr(data, "data", None)
        if not isinstance(entries, dict):
            raise DataError(
                f"PostprocessingDataset: the post-processing gave a {type(data).__name__} as sequence {index}, not a "
                f"tensor dict (whose .data maps keys to tensors)."
            )
        seq = {}
        for key, info in self._info.items():
            if key not in entries:
                raise DataError(
                    f"PostprocessingDataset: sequence {index} lacks key {key!r} ({', '.join(entries)} given). Give "
                    f"map_outputs when the functions change the keys."
                )
            array = np.asarray(entries[key].raw_tensor)
            if str(array.dtype) != info["dtype"] or array.ndim != len(info["shape"]):
                raise DataError(
                    f"PostprocessingDataset: sequence {index} key {key!r} is {array.dtype} of shape {array.shape}, but "
                    f"{info['dtype']} of shape {info['shape']} was declared (map_outputs, or the wrapped dataset's "
                    f"key). Declare what the functions give in map_outputs, or cast in the function."
                )
            seq[key] = array
        tag = str(entries["seq_tag"].raw_tensor) if "seq_tag" in entries else f"seq-{index}"
        return seq, tag


def _check_signature(function: Callable[..., Any], name: str) -> None:
    """RETURNN calls the functions with keyword arguments it may extend: they must take ``**kwargs``."""
    if not callable(function):
        raise ConfigError(f"PostprocessingDataset: {name} must be a function, got {function!r}.")
    try:
        parameters = inspect.signature(function).parameters.values()
    except (TypeError, ValueError):
        return  # a builtin or C function: nothing to check
    if not any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters):
        raise ConfigError(
            f"PostprocessingDataset: {name} {getattr(function, '__name__', function)!r} must accept **kwargs (RETURNN "
            f"passes epoch, rng and more, and requires it for forward compatibility): add **kwargs to its parameters."
        )


def _outputs_info(map_outputs: Any) -> dict[str, dict[str, Any]]:
    """``map_outputs`` as key info: ``shape``/``dtype``/``sparse_dim`` (or RETURNN's ``dim``, ``dims``)."""
    if not isinstance(map_outputs, dict) or not map_outputs:
        raise ConfigError("PostprocessingDataset: map_outputs must be a dict {key: {'dtype': ..., 'shape': ...}}.")
    info = {}
    for key, spec in map_outputs.items():
        if not isinstance(spec, dict):
            raise ConfigError(f"PostprocessingDataset: map_outputs[{key!r}] must be a dict, got {spec!r}.")
        sparse = spec.get("sparse_dim")
        sparse = getattr(sparse, "dimension", sparse)
        if "dims" in spec:
            shape = tuple(getattr(dim, "dimension", dim) for dim in spec["dims"])
        elif "shape" in spec:
            shape = tuple(spec["shape"])
        else:  # RETURNN's default layout: time, then a feature axis of size dim unless sparse
            sparse = spec["dim"] if spec.get("sparse") and sparse is None else sparse
            shape = (None,) if sparse is not None or "dim" not in spec else (None, spec["dim"])
        dtype = spec.get("dtype", "int32" if sparse is not None else "float32")
        info[key] = {"shape": shape, "dtype": str(np.dtype(dtype)), "sparse_dim": sparse}
    return info


__all__ = ["PostprocessingDataset", "LaplaceOrdering", "Sequential", "SeqTensor", "SeqTensorDict"]

DATASETS = (PostprocessingDataset,)
