"""RETURNN's generated datasets of its demos and tests: ``CopyTaskDataset`` and the ``DummyDataset`` family.

The sequences are RETURNN's for the same parameters. As in RETURNN, a random one is drawn from a generator seeded
with (the epoch's seed, the sequence's index): its values depend on the (full) epoch, not on the order in which
sequences are read, so any step can be read again. The epoch's seed is ``fixed_random_seed`` if given (then every
epoch has the same sequences), else the full epoch's number plus ``random_seed_offset``; as in RETURNN, the
config's ``random_seed`` does not change the data (it still shuffles a "random" ordering).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from framework.base.errors import ConfigError
from framework.datasets.base import Dataset


class EpochGeneratedDataset(Dataset):
    """``num_seqs`` sequences that ``generate`` makes from a generator seeded per (full epoch, sequence).

    :param num_seqs: sequences per full epoch (RETURNN's default, endless, is not possible here).
    :param fixed_random_seed: the same sequences every epoch, drawn with this seed.
    :param random_seed_offset: RETURNN's offset added to the epoch's seed.
    """

    returnn_worker_shards = True  # RETURNN's GeneratingDataset shards over DataLoader workers (supports_sharding)
    returnn_eval_sorted = False  # RETURNN's generated datasets reset a dev/eval "sorted" to "default"

    def __init__(
        self,
        *,
        num_seqs: int | float = math.inf,
        fixed_random_seed: int | None = None,
        random_seed_offset: int = 0,
        seq_ordering: str | None = None,
        **kwargs: Any,
    ):
        if seq_ordering in ("sorted", "sorted_reverse"):
            seq_ordering = "default"  # RETURNN's generated datasets ignore a sorted ordering (they have no lengths)
        super().__init__(seq_ordering=seq_ordering, fixed_random_seed=fixed_random_seed, **kwargs)
        if not isinstance(num_seqs, int) or isinstance(num_seqs, bool) or num_seqs < 1:
            raise ConfigError(
                f"{type(self).__name__}: num_seqs = {num_seqs!r}; give the number of sequences of an epoch (an int >= "
                f"1). RETURNN's endless generated datasets (num_seqs=inf) have no epochs here."
            )
        self._num_seqs = num_seqs
        self.data_seed = fixed_random_seed
        self.random_seed_offset = random_seed_offset
        self.epoch = 1
        self._lengths: tuple[int, np.ndarray] | None = None

    @property
    def num_seqs(self) -> int:
        return self._num_seqs

    def epoch_seed(self, epoch: int) -> int:
        """RETURNN's seed of (sub-)epoch ``epoch``: the same for all sub-epochs of a full epoch."""
        if self.data_seed is not None:
            return self.data_seed
        return (epoch - 1) // self.partition_epoch + 1 + self.random_seed_offset

    def use_epoch(self, epoch: int) -> None:
        self.epoch = epoch

    def get_seq_order(self, epoch: int, shard: tuple[int, int] = (0, 1)) -> np.ndarray:
        self.use_epoch(epoch)  # the lengths the batches are planned with are this epoch's
        return super().get_seq_order(epoch, shard)

    def get_seq(self, index: int) -> dict[str, np.ndarray]:
        rng = np.random.RandomState((self.epoch_seed(self.epoch), index))
        return self.generate(index, rng)

    def generate(self, index: int, rng: np.random.RandomState) -> dict[str, np.ndarray]:
        """Sequence ``index`` of the current epoch, drawing from ``rng`` (seeded for it)."""
        raise NotImplementedError

    def seq_lengths(self) -> np.ndarray:
        seed = self.epoch_seed(self.epoch)
        if self._lengths is None or self._lengths[0] != seed:
            lengths = np.array([len(self.get_seq(i)["data"]) for i in range(self.num_seqs)], dtype=np.int64)
            self._lengths = seed, lengths
        return self._lengths[1]

    def lengths_of(self, key: str) -> np.ndarray:
        return self.seq_lengths()


class CopyTaskDataset(EpochGeneratedDataset):
    """Random label sequences whose target is the sequence itself: ``data`` and ``classes`` [T] int8.

    :param nsymbols: the labels (at most 256).
    :param minlen: the shortest sequence; ``maxlen`` the longest.
    :param minlen_epoch_factor: ``minlen`` grows by this times the epoch (a curriculum); ``maxlen_epoch_factor``
        likewise.
    """

    def __init__(
        self,
        nsymbols: int,
        minlen: int = 0,
        maxlen: int = 0,
        minlen_epoch_factor: float = 0,
        maxlen_epoch_factor: float = 0,
        **kwargs: Any,
    ):
        super().__init__(**kwargs)
        if not 1 <= nsymbols <= 256:
            raise ConfigError(f"CopyTaskDataset: nsymbols must be between 1 and 256 (int8 labels), got {nsymbols}.")
        self.nsymbols = nsymbols
        self.minlen, self.maxlen = minlen, maxlen
        self.minlen_epoch_factor, self.maxlen_epoch_factor = minlen_epoch_factor, maxlen_epoch_factor
        for epoch in (1, 2):  # the bounds grow linearly: valid in the first epochs means valid for a growing maxlen
            low, high = self._bounds(epoch)
            if not 0 < low <= high:
                raise ConfigError(
                    f"CopyTaskDataset: in epoch {epoch} the lengths are {low} .. {high}; need 0 < minlen <= maxlen "
                    f"(minlen + minlen_epoch_factor * epoch, and the same for maxlen)."
                )

    def _bounds(self, epoch: int) -> tuple[int, int]:
        low = int(self.minlen + self.minlen_epoch_factor * epoch)
        return low, int(self.maxlen + self.maxlen_epoch_factor * epoch)

    def key_info(self) -> dict[str, dict[str, Any]]:
        info = {"shape": (None,), "dtype": "int8", "sparse_dim": self.nsymbols}
        return {"data": dict(info), "classes": dict(info)}

    def generate(self, index: int, rng: np.random.RandomState) -> dict[str, np.ndarray]:
        low, high = self._bounds(self.epoch)
        length = rng.randint(low, high + 1)
        # one draw per label, as RETURNN draws them (a vectorised draw would give other labels)
        labels = np.array([rng.randint(0, self.nsymbols) for _ in range(length)], dtype=np.int8)
        return {"data": labels, "classes": labels}


class DummyDataset(EpochGeneratedDataset):
    """RETURNN's meaningless test data: ``data`` [seq_len, input_dim] float32 counting up from the sequence's index
    (``((i % input_max_value) + input_shift) * input_scale``), ``classes`` [seq_len] int32 counting on modulo the
    number of classes. The same every epoch.

    :param input_dim: the features per frame.
    :param output_dim: the classes: an int, or RETURNN's dict ``{"classes": (dim, 1)}``.
    :param seq_len: frames per sequence.
    :param input_shift: None: ``-input_max_value / 2``; ``input_scale`` None: ``1 / input_max_value``.
    """

    returnn_window = "stacks"  # what RETURNN's class does with window (context_window.py)

    def __init__(
        self,
        input_dim: int,
        output_dim: int | dict[str, Any],
        num_seqs: int,
        seq_len: int = 2,
        input_max_value: float = 10.0,
        input_shift: float | None = None,
        input_scale: float | None = None,
        **kwargs: Any,
    ):
        super().__init__(num_seqs=num_seqs, **kwargs)
        if not isinstance(seq_len, int) or seq_len < 1 or not isinstance(input_dim, int) or input_dim < 1:
            raise ConfigError(
                f"DummyDataset: input_dim and seq_len must be ints >= 1, got {input_dim!r} and {seq_len!r} (RETURNN's "
                f"DummyDatasetMultipleSequenceLength, with a seq_len per key, is not available here)."
            )
        self.input_dim, self.seq_len = input_dim, seq_len
        self.num_classes = _classes_dim(output_dim)
        self.input_max_value = input_max_value
        self.input_shift = -input_max_value / 2.0 if input_shift is None else input_shift
        self.input_scale = 1.0 / input_max_value if input_scale is None else input_scale

    def key_info(self) -> dict[str, dict[str, Any]]:
        return {
            "data": {"shape": (None, self.input_dim), "dtype": "float32", "sparse_dim": None},
            "classes": {"shape": (None,), "dtype": "int32", "sparse_dim": self.num_classes},
        }

    def get_seq(self, index: int) -> dict[str, np.ndarray]:
        return self.generate(index, None)

    def generate(self, index: int, rng: Any) -> dict[str, np.ndarray]:
        frames = self.seq_len * self.input_dim
        data = _counting(index, frames, self.input_max_value, self.input_shift, self.input_scale).astype(np.float32)
        classes = np.arange(index + frames, index + frames + self.seq_len) % self.num_classes
        return {"data": data.reshape(self.seq_len, self.input_dim), "classes": classes.astype(np.int32)}

    def seq_lengths(self) -> np.ndarray:
        return np.full(self.num_seqs, self.seq_len, dtype=np.int64)


class DummyDatasetMultipleSequenceLength(DummyDataset):
    """``DummyDataset`` with other lengths for ``data`` and ``classes``: ``seq_len = {"data": 10, "classes": 20}``
    (RETURNN's default). As in RETURNN, ``data`` is float64 and ``classes`` int64 here."""

    def __init__(self, input_dim: int, output_dim: int | dict[str, Any], num_seqs: int, seq_len: Any = None, **kwargs):
        seq_len = {"data": 10, "classes": 20} if seq_len is None else seq_len
        if not isinstance(seq_len, dict) or set(seq_len) != {"data", "classes"}:
            raise ConfigError(
                f"DummyDatasetMultipleSequenceLength: seq_len must be {{'data': frames, 'classes': labels}}, got "
                f"{seq_len!r}."
            )
        super().__init__(input_dim, output_dim, num_seqs, seq_len=1, **kwargs)
        self.lengths = {key: int(value) for key, value in seq_len.items()}

    def key_info(self) -> dict[str, dict[str, Any]]:
        return {
            "data": {"shape": (None, self.input_dim), "dtype": "float64", "sparse_dim": None},
            "classes": {"shape": (None,), "dtype": "int64", "sparse_dim": self.num_classes},
        }

    def generate(self, index: int, rng: Any) -> dict[str, np.ndarray]:
        frames = self.lengths["data"] * self.input_dim
        data = _counting(index, frames, self.input_max_value, self.input_shift, self.input_scale)
        classes = np.arange(index + frames, index + frames + self.lengths["classes"]) % self.num_classes
        return {"data": data.reshape(self.lengths["data"], self.input_dim), "classes": classes.astype(np.int64)}

    def seq_lengths(self) -> np.ndarray:
        return np.full(self.num_seqs, max(self.lengths.values()), dtype=np.int64)

    def lengths_of(self, key: str) -> np.ndarray:
        return np.full(self.num_seqs, self.lengths[key], dtype=np.int64)


class DummyDatasetMultipleDataKeys(EpochGeneratedDataset):
    """RETURNN's dummy data for any keys: ``output_dim = {"data": (40, 2), "classes": (10, 1)}`` (ndim 1: class ids
    counting on modulo the classes, int64; else float64 frames counting on as ``DummyDataset``'s), one after the
    other from the sequence's index; ``seq_len`` an int for all keys or one per key (default 20)."""

    def __init__(
        self,
        output_dim: dict[str, Any],
        num_seqs: int,
        seq_len: int | dict[str, int] | None = None,
        input_max_value: float = 10.0,
        input_shift: float | None = None,
        input_scale: float | None = None,
        data_keys: list[str] | None = None,
        **kwargs: Any,
    ):
        super().__init__(num_seqs=num_seqs, **kwargs)
        self.data_keys = list(data_keys or ["data", "classes"])
        lengths = {key: seq_len if isinstance(seq_len, int) else 20 for key in self.data_keys}
        if isinstance(seq_len, dict):
            lengths = dict(seq_len)
        if (
            not isinstance(output_dim, dict)
            or set(output_dim) != set(self.data_keys)
            or set(lengths) != set(self.data_keys)
        ):
            raise ConfigError(
                f"DummyDatasetMultipleDataKeys: output_dim ({output_dim!r}) and a seq_len dict must name exactly the "
                f"data_keys {self.data_keys} (as RETURNN requires)."
            )
        self.dims = {key: _dim_ndim(key, value) for key, value in output_dim.items()}
        self.lengths = {key: int(value) for key, value in lengths.items()}
        self.input_max_value = input_max_value
        self.input_shift = -input_max_value / 2.0 if input_shift is None else input_shift
        self.input_scale = 1.0 / input_max_value if input_scale is None else input_scale

    def key_info(self) -> dict[str, dict[str, Any]]:
        info = {}
        for key in self.data_keys:
            dim, ndim = self.dims[key]
            if ndim == 1:
                info[key] = {"shape": (None,), "dtype": "int64", "sparse_dim": dim}
            else:
                info[key] = {"shape": (None, dim), "dtype": "float64", "sparse_dim": None}
        return info

    def get_seq(self, index: int) -> dict[str, np.ndarray]:
        seq, start = {}, index
        for key in self.data_keys:
            (dim, ndim), length = self.dims[key], self.lengths[key]
            if ndim == 1:
                seq[key] = (np.arange(start, start + length) % dim).astype(np.int64)
                start += length
            else:
                values = _counting(start, length * dim, self.input_max_value, self.input_shift, self.input_scale)
                seq[key] = values.reshape(length, dim)
                start += length * dim
        return seq

    def seq_lengths(self) -> np.ndarray:
        return np.full(self.num_seqs, max(self.lengths.values()), dtype=np.int64)

    def lengths_of(self, key: str) -> np.ndarray:
        return np.full(self.num_seqs, self.lengths[key], dtype=np.int64)


class DummyGenericDataset(EpochGeneratedDataset):
    """RETURNN's random data after a tensor dict such as ``extern_data`` (``data_template``): per key, ids below its
    sparse dim (sparse), standard-normal values (float) or ids below 10 (int), of its dtype; each variable axis gets a
    random length, ``seq_lens`` (an int, a (min, max) pair, or a dict of those by key, by RETURNN ``Dim`` or by None
    for all), by default 1000-8000 for raw audio (float of shape (None,) or (None, 1)) and 5-15 otherwise.

    The draws are RETURNN's (returnn/datasets/generating.py, returnn/tensor/utils.py): for each key, in the template's
    order, one length for every variable axis of the template (each axis of a dict entry its own, a ``Dim`` shared
    by the entries that name it), then the key's values, from the sequence's generator.
    """

    def __init__(
        self,
        data_template: dict[str, Any],
        num_seqs: int,
        *,
        seq_lens: int | tuple[int, int] | dict[Any, int | tuple[int, int]] | None = None,
        **kwargs: Any,
    ):
        from framework.datasets.extern_data import parse_extern_data

        super().__init__(num_seqs=num_seqs, **kwargs)
        if not isinstance(data_template, dict) or not data_template:
            raise ConfigError(
                f"DummyGenericDataset: data_template = {data_template!r}; give a dict of data keys as extern_data "
                f"writes them (RETURNN's use_dummy_datasets passes extern_data)."
            )
        self.keys = parse_extern_data(data_template, "DummyGenericDataset data_template")
        # the variable axes of each key, as ids shared where RETURNN shares a Dim (RETURNN draws them in this order)
        self.key_axes: dict[str, list[Any]] = {}
        self.axes: list[Any] = []
        for key, entry in data_template.items():
            self.key_axes[key] = [axis for axis in _variable_axes(key, entry, self.keys[key]) if axis is not None]
            self.axes += [axis for axis in self.key_axes[key] if axis not in self.axes]
        self.size_range = {
            axis: _size_range(seq_lens, axis, key, self.keys[key]) for key in self.keys for axis in self.key_axes[key]
        }
        for key, info in self.keys.items():
            if info.sparse_dim is None and not info.dtype.startswith(("float", "int", "uint")):
                raise ConfigError(
                    f"DummyGenericDataset: data_template[{key!r}] has dtype {info.dtype!r}; RETURNN generates only "
                    f"sparse ids, floats and ints (NotImplementedError otherwise)."
                )

    def key_info(self) -> dict[str, dict[str, Any]]:
        return {k: {"shape": v.shape, "dtype": v.dtype, "sparse_dim": v.sparse_dim} for k, v in self.keys.items()}

    def generate(self, index: int, rng: np.random.RandomState) -> dict[str, np.ndarray]:
        seq = {}
        for key, info in self.keys.items():
            # RETURNN draws the lengths of all the template's variable axes again for every key
            lengths = {
                axis: rng.randint(low, high + 1, size=[1], dtype=np.int32)
                for axis, (low, high) in ((axis, self.size_range[axis]) for axis in self.axes)
            }
            variable = iter(self.key_axes[key])
            shape = [int(lengths[next(variable)][0]) if size is None else size for size in info.shape]
            if info.sparse_dim is not None:
                seq[key] = rng.randint(0, info.sparse_dim, shape, dtype=info.dtype)
            elif info.dtype.startswith("float"):
                seq[key] = rng.standard_normal(shape).astype(info.dtype)
            else:
                seq[key] = rng.randint(0, 10, shape, dtype=info.dtype)
        return seq

    def _key_lengths(self) -> dict[str, np.ndarray]:
        """The first axis's length of every key in every sequence of the current epoch (cached per epoch seed)."""
        seed = self.epoch_seed(self.epoch)
        cache = self.__dict__.setdefault("_generic_lengths", {})
        if seed not in cache:
            seqs = [self.get_seq(i) for i in range(self.num_seqs)]
            cache.clear()
            cache[seed] = {
                key: np.array([seq[key].shape[0] if seq[key].ndim else 1 for seq in seqs], dtype=np.int64)
                for key in self.keys
            }
        return cache[seed]

    def seq_lengths(self) -> np.ndarray:
        variable = [lengths for key, lengths in self._key_lengths().items() if self.keys[key].variable]
        return np.max(variable, axis=0) if variable else np.ones(self.num_seqs, dtype=np.int64)

    def lengths_of(self, key: str) -> np.ndarray:
        return self._key_lengths()[key]


def _variable_axes(key: str, entry: dict[str, Any], info: Any) -> list[Any]:
    """Per axis of ``key`` (without the batch axis): an id of its variable-length axis (RETURNN ``Dim`` objects by
    identity, so that entries naming the same Dim share it; else one of its own), None for a fixed one."""
    dims = next((entry[k] for k in ("dims", "dim_tags") if isinstance(entry.get(k), (list, tuple))), None)
    if dims is None or not all(hasattr(d, "is_batch_dim") for d in dims):
        return [None if size is not None else (key, axis) for axis, size in enumerate(info.shape)]
    axes = []
    for dim in (d for d in dims if not d.is_batch_dim()):
        if dim.dimension is None and getattr(dim, "derived_from_op", None) is not None:
            raise ConfigError(
                f"DummyGenericDataset: data_template[{key!r}] has the derived dim {dim} (computed from other dims); "
                f"its lengths are not generated here: give it its own dim."
            )
        axes.append(None if dim.dimension is not None else ("dim", id(dim)))
    return axes


def _size_range(seq_lens: Any, axis: Any, key: str, info: Any) -> tuple[int, int]:
    """RETURNN's (min, max) length of variable axis ``axis`` of ``key`` (tensor_dict_dims_random_seq_len_min_max)."""
    table = seq_lens if isinstance(seq_lens, dict) else {} if seq_lens is None else {None: seq_lens}
    by_dim = {("dim", id(k)): v for k, v in table.items() if k is not None and not isinstance(k, str)}
    if axis in by_dim:
        size = by_dim[axis]
    elif key in table:
        size = table[key]
    elif None in table:
        size = table[None]
    elif info.shape in ((None,), (None, 1)) and info.dtype.startswith("float"):
        return 1_000, 8_000  # RETURNN: raw audio samples at 16 kHz
    else:
        return 5, 15
    if isinstance(size, int) and not isinstance(size, bool):
        size = (size, size)
    if not (isinstance(size, (tuple, list)) and len(size) == 2 and all(isinstance(v, int) for v in size)) or not (
        0 <= size[0] <= size[1]
    ):
        raise ConfigError(f"DummyGenericDataset: seq_lens gives {size!r} for {key!r}; give an int or (min, max).")
    return int(size[0]), int(size[1])


class TaskNumberBaseConvertDataset(EpochGeneratedDataset):
    """RETURNN's number conversion task: ``data`` the digits of a random number in ``input_base`` (int64 ids,
    ``min_input_seq_len`` to ``max_input_seq_len`` digits), ``classes`` its digits in ``output_base``."""

    def __init__(
        self,
        input_base: int = 8,
        output_base: int = 2,
        min_input_seq_len: int = 1,
        max_input_seq_len: int = 8,
        **kwargs: Any,
    ):
        super().__init__(**kwargs)
        if not (2 <= input_base <= 36 and 2 <= output_base <= 36 and 0 < min_input_seq_len <= max_input_seq_len):
            raise ConfigError(
                f"TaskNumberBaseConvertDataset: need bases from 2 to 36 and 0 < min_input_seq_len <= max_input_seq_len, "
                f"got {input_base}, {output_base}, {min_input_seq_len}, {max_input_seq_len}."
            )
        self.input_base, self.output_base = input_base, output_base
        self.min_len, self.max_len = min_input_seq_len, max_input_seq_len

    def key_info(self) -> dict[str, dict[str, Any]]:
        return {
            "data": {"shape": (None,), "dtype": "int64", "sparse_dim": self.input_base},
            "classes": {"shape": (None,), "dtype": "int64", "sparse_dim": self.output_base},
        }

    def generate(self, index: int, rng: np.random.RandomState) -> dict[str, np.ndarray]:
        length = rng.randint(self.min_len, self.max_len + 1)
        digits = [rng.randint(0, self.input_base) for _ in range(length)]  # one draw per digit, as RETURNN
        number = int("".join(np.base_repr(d, self.input_base) for d in digits), self.input_base)
        out = []
        while number:
            number, digit = divmod(number, self.output_base)
            out.append(digit)
        return {"data": np.array(digits, dtype=np.int64), "classes": np.array(out[::-1] or [0], dtype=np.int64)}


class TaskEpisodicCopyDataset(EpochGeneratedDataset):
    """RETURNN's episodic copy task over ``" .01234567"``: 1-9 random digits, 1-99 blanks, then delimiters while the
    target recalls the digits. ``data`` one-hot [T, 10] float32 (as RETURNN gives it), ``classes`` [T] int64."""

    returnn_window = "stacks"  # what RETURNN's class does with window (context_window.py)

    SYMBOLS = " .01234567"

    def key_info(self) -> dict[str, dict[str, Any]]:
        return {
            "data": {"shape": (None, len(self.SYMBOLS)), "dtype": "float32", "sparse_dim": None},
            "classes": {"shape": (None,), "dtype": "int64", "sparse_dim": len(self.SYMBOLS)},
        }

    def generate(self, index: int, rng: np.random.RandomState) -> dict[str, np.ndarray]:
        count = rng.randint(1, 10)
        digits = "".join(rng.choice(list(self.SYMBOLS[2:])) for _ in range(count))
        text = digits + " " * rng.randint(1, 100) + "." + "." * (count + 1)
        # the target: blanks until the first delimiter (which is a blank too), then the digits, then delimiters
        waiting = text.index(".") + 1
        recalled = (digits + "." * len(text))[: len(text) - waiting]
        target = " " * waiting + recalled
        ids = [self.SYMBOLS.index(c) for c in text]
        one_hot = np.zeros((len(ids), len(self.SYMBOLS)), dtype=np.float32)
        one_hot[np.arange(len(ids)), ids] = 1
        return {"data": one_hot, "classes": np.array([self.SYMBOLS.index(c) for c in target], dtype=np.int64)}


def _counting(start: int, count: int, max_value: float, shift: float, scale: float) -> np.ndarray:
    """RETURNN's dummy features: ``((i % max_value) + shift) * scale`` for i from ``start`` on, float64."""
    return (np.arange(start, start + count, dtype=np.float64) % max_value + shift) * scale


def _dim_ndim(key: str, value: Any) -> tuple[int, int]:
    """RETURNN's ``(dim, ndim)`` of an ``output_dim`` entry (an int is dense frames of that dim)."""
    if isinstance(value, int):
        return value, 2
    if isinstance(value, dict):
        return int(value["dim"]), 1 if value.get("sparse") else int(value.get("ndim", 2))
    if isinstance(value, (tuple, list)) and len(value) == 2:
        return int(value[0]), int(value[1])
    raise ConfigError(f"DummyDatasetMultipleDataKeys: output_dim[{key!r}] = {value!r}; give (dim, ndim).")


def _classes_dim(output_dim: Any) -> int:
    """The number of classes of RETURNN's ``output_dim``: an int, or ``{"classes": dim | (dim, 1) | {"dim": dim}}``."""
    value = output_dim.get("classes") if isinstance(output_dim, dict) else output_dim
    if isinstance(value, (tuple, list)) and len(value) == 2:
        value = value[0]
    elif isinstance(value, dict):
        value = value.get("dim")
    if not isinstance(value, int) or value < 1:
        raise ConfigError(
            f"DummyDataset: output_dim = {output_dim!r}; give the number of classes (an int), or "
            f"{{'classes': (number, 1)}} as RETURNN writes it."
        )
    return value


def dummy_dataset_specs(get: Any) -> dict[str, Any]:
    """RETURNN's ``use_dummy_datasets`` (returnn/__main__.py ``setup_dummy_datasets``): the dataset options the config
    sets (``get(name)``), each replaced by a DummyGenericDataset over ``extern_data``: train with
    ``train_dummy_dataset_num_seqs`` (else ``dummy_dataset_num_seqs``, else 1000) sequences; dev, eval, forward_data,
    search_data and each of eval_datasets with ``dummy_dataset_num_seqs`` (else train's / 20 (at least 1) where train
    is set, else 100), ``fixed_random_seed`` the crc32 of the option's (or eval_datasets key's) name."""
    from binascii import crc32

    extern_data = get("extern_data")
    if not extern_data:
        raise ConfigError(
            "use_dummy_datasets: RETURNN builds the dummy datasets after extern_data; define extern_data."
        )
    num_seqs = get("dummy_dataset_num_seqs")
    specs: dict[str, Any] = {}
    if get("train"):
        train_num = get("train_dummy_dataset_num_seqs")
        train_num = (num_seqs if train_num is None else train_num) or 1000
        num_seqs = num_seqs or max(train_num // 20, 1)
        specs["train"] = {"class": "DummyGenericDataset", "data_template": extern_data, "num_seqs": train_num}
    num_seqs = num_seqs or 100

    def dummy(name: str) -> dict[str, Any]:
        seed = crc32(name.encode("utf8"))
        return {
            "class": "DummyGenericDataset",
            "data_template": extern_data,
            "num_seqs": num_seqs,
            "fixed_random_seed": seed,
        }

    specs.update({name: dummy(name) for name in ("dev", "eval", "forward_data", "search_data") if get(name)})
    if get("eval_datasets"):
        specs["eval_datasets"] = {name: dummy(name) for name in get("eval_datasets")}
    return specs


DATASETS = (
    CopyTaskDataset,
    DummyDataset,
    DummyDatasetMultipleSequenceLength,
    DummyDatasetMultipleDataKeys,
    DummyGenericDataset,
    TaskNumberBaseConvertDataset,
    TaskEpisodicCopyDataset,
)
