"""RETURNN's ``CombinedDataset``: the sequences of several datasets in one epoch, for multi-task training or a mix
of corpora. Each sequence comes from one dataset and has only that dataset's keys filled; the other keys are empty
(length 0; zeros for a fixed-shape key, as RETURNN gives).

``data_map = {("asr", "data"): "data", ("asr", "classes"): "classes", ("lm", "data"): "classes"}`` maps a
(dataset, its key) to this dataset's key (the reverse of ``MetaDataset``'s map). The datasets are taken in the
order of their names; each orders its own sequences of the epoch (its ``seq_ordering``, ``partition_epoch``), and
this dataset then orders them all together, as RETURNN does:

- "default": the first dataset's sequences of the epoch, then the second's, ...;
- "random_dataset": the datasets interleaved at random, each keeping its order (RETURNN's draw, exactly);
- "sorted", "sorted_reverse", "laplace", "random": all together, by each dataset's sorting lengths (RETURNN
  sorts by what each dataset estimates, the length of HDF's ``data``; see ``Dataset.order_lengths``);
- ``sampling_sizes``: a fixed number of sequences from each dataset per epoch, continuing where the previous
  epoch stopped and wrapping around, then ordered as above.

``partition_epoch`` splits the joint order. RETURNN's "interleave" ordering picks the next dataset by how far each
has got, as the data streams in; it is refused here.
"""

from __future__ import annotations

import random
from typing import Any

import numpy as np

from framework.base.errors import ConfigError
from framework.datasets.base import Dataset
from framework.datasets.data_dims import check_data_dims
from framework.datasets.registry import init_dataset


class CombinedDataset(Dataset):
    """Sequences of several datasets, keys mapped by ``data_map``.

    :param datasets: ``{name: dataset dict}``; those ``data_map`` does not use are not built (as in RETURNN).
    :param data_map: ``{(dataset name, its key): key}``.
    :param sampling_sizes: sequences taken from each dataset per epoch (an int for all, or ``{name: count}``).
    :param data_dims: RETURNN's ``{key: (dim, ndim)}``, checked against the datasets.
    :param data_dtypes: RETURNN's dtypes of the empty arrays of missing keys; here they have the key's dtype.
    :param random_seed_offset: RETURNN's offset of the "random_dataset" draw's seed (the full epoch's number).
    """

    def __init__(
        self,
        datasets: dict[str, Any],
        data_map: dict[tuple[str, str], str],
        sampling_sizes: int | dict[str, int] | None = None,
        data_dims: dict[str, Any] | None = None,
        data_dtypes: dict[str, str] | None = None,
        window: int = 1,
        interleave_gumbel_scale: float | str | None = None,
        random_seed_offset: int = 0,
        seq_ordering: str | None = None,
        fixed_random_seed: int | None = None,
        **kwargs: Any,
    ):
        if seq_ordering == "interleave" or interleave_gumbel_scale is not None:
            raise ConfigError(
                "CombinedDataset: seq_ordering 'interleave' (and interleave_gumbel_scale) picks the next dataset by how "
                "far each has got while the data streams in; that is not available here. Use 'random_dataset' (the "
                "datasets mixed at random, each in its order) or 'default'."
            )
        if window != 1:
            raise ConfigError("CombinedDataset: window must be 1 (RETURNN does not implement another either).")
        self.random_dataset = seq_ordering == "random_dataset"
        super().__init__(
            seq_ordering="default" if self.random_dataset else seq_ordering,
            fixed_random_seed=fixed_random_seed,
            **kwargs,
        )
        self.data_seed, self.random_seed_offset = fixed_random_seed, random_seed_offset
        self.data_map = _check_data_map(data_map, datasets)
        self.names = sorted({name for name, _ in self.data_map})  # RETURNN's dataset order: by name
        self.datasets: list[Dataset] = [
            init_dataset(
                datasets[name], option=f"CombinedDataset datasets[{name!r}]", random_seed=self.random_seed, parent=self
            )
            for name in self.names
        ]
        self.keys = {name: {} for name in self.names}  # per dataset: {this dataset's key: its key}
        for (name, sub_key), key in self.data_map.items():
            self.keys[name][key] = sub_key
        self._info = self._key_info(data_dims)
        self.sampling_sizes = self._sampling_sizes(sampling_sizes)
        self._starts = np.cumsum([0] + [dataset.num_seqs for dataset in self.datasets])
        self.name = (
            f"CombinedDataset({', '.join(f'{n}: {d.name}' for n, d in zip(self.names, self.datasets, strict=True))})"
        )

    def _key_info(self, data_dims: Any) -> dict[str, dict[str, Any]]:
        info: dict[str, dict[str, Any]] = {}
        for (name, sub_key), key in self.data_map.items():
            dataset = self.datasets[self.names.index(name)]
            if sub_key not in dataset.key_info():
                raise ConfigError(
                    f"CombinedDataset: data_map has ({name!r}, {sub_key!r}), but {dataset.name} has the keys "
                    f"{', '.join(dataset.key_info())}."
                )
            sub_info = dict(dataset.key_info()[sub_key])
            if key in info and info[key]["shape"] != sub_info["shape"]:
                raise ConfigError(
                    f"CombinedDataset: key {key!r} comes from datasets with different shapes: {info[key]} and "
                    f"({name!r}, {sub_key!r}) {sub_info}. Map keys of the same kind onto one key."
                )
            if key in info and info[key]["sparse_dim"] != sub_info["sparse_dim"]:
                # class ids of two inventories on one key (RETURNN takes the last one's): room for the ids of both
                dims = [d for d in (info[key]["sparse_dim"], sub_info["sparse_dim"]) if d is not None]
                info[key]["sparse_dim"] = max(dims) if dims else None
            info.setdefault(key, sub_info)
        check_data_dims("CombinedDataset", info, data_dims)
        return info

    def _sampling_sizes(self, sizes: Any) -> list[int] | None:
        if sizes is None:
            return None
        if self.partition_epoch != 1:
            raise ConfigError("CombinedDataset: sampling_sizes and partition_epoch do not go together (as in RETURNN).")
        sizes = {name: sizes for name in self.names} if isinstance(sizes, int) else dict(sizes)
        missing = [name for name in self.names if name not in sizes]
        if missing or any(not isinstance(sizes[name], int) or sizes[name] < 0 for name in self.names):
            raise ConfigError(
                f"CombinedDataset: sampling_sizes must give a count >= 0 for every dataset ({', '.join(self.names)}), "
                f"got {sizes!r}."
            )
        return [sizes[name] for name in self.names]

    # -- the dataset interface ---------------------------------------------------------------------------------
    @property
    def num_seqs(self) -> int:
        return int(self._starts[-1])

    def key_info(self) -> dict[str, dict[str, Any]]:
        return {key: dict(value) for key, value in self._info.items()}

    def _locate(self, index: int) -> tuple[int, int]:
        part = int(np.searchsorted(self._starts, index, side="right")) - 1
        return part, index - int(self._starts[part])

    def seq_tag(self, index: int) -> str:
        part, local = self._locate(index)
        return self.datasets[part].seq_tag(local)

    def use_epoch(self, epoch: int) -> None:
        for dataset in self.datasets:
            dataset.use_epoch(epoch)

    def get_seq(self, index: int) -> dict[str, np.ndarray]:
        part, local = self._locate(index)
        seq = self.datasets[part].get_seq(local)
        mapped = self.keys[self.names[part]]
        return {key: seq[mapped[key]] if key in mapped else self._empty(key) for key in self._info}

    def _empty(self, key: str) -> np.ndarray:
        shape, dtype = self._info[key]["shape"], self._info[key]["dtype"]
        if shape and shape[0] is None:
            return np.zeros((0, *shape[1:]), dtype=dtype)
        return np.zeros(shape, dtype=dtype)

    def order_lengths(self) -> np.ndarray:
        return np.concatenate([d.order_lengths() for d in self.datasets]).astype(np.int64)

    def seq_lengths(self) -> np.ndarray:
        return np.concatenate([d.seq_lengths() for d in self.datasets]).astype(np.int64)

    def lengths_of(self, key: str) -> np.ndarray:
        parts = []
        for name, dataset in zip(self.names, self.datasets, strict=True):
            sub_key = self.keys[name].get(key)
            parts.append(dataset.lengths_of(sub_key) if sub_key else np.zeros(dataset.num_seqs, dtype=np.int64))
        return np.concatenate(parts).astype(np.int64)

    def get_seq_order(self, epoch: int) -> np.ndarray:
        # Each dataset's sequences of this epoch, in its own order, as indices of this dataset.
        members = [self._starts[d] + dataset.get_seq_order(epoch) for d, dataset in enumerate(self.datasets)]
        full_epoch, part = divmod(epoch - 1, self.partition_epoch)
        if self.sampling_sizes is not None:
            joint = np.concatenate(
                [self._sample(m, size, epoch) for m, size in zip(members, self.sampling_sizes, strict=True)]
            )
        elif self.random_dataset:
            joint = self._mixed(members, full_epoch + 1)
        else:
            joint = np.concatenate(members)
        if not self.random_dataset:
            joint = self.unique(joint[self.ordered(len(joint), lambda: self.sort_lengths()[joint], full_epoch + 1)])
        return self.filtered(np.array_split(joint.astype(np.int64), self.partition_epoch)[part])

    @staticmethod
    def _sample(members: np.ndarray, size: int, epoch: int) -> np.ndarray:
        """``size`` of the dataset's epoch sequences, continuing where epoch - 1 stopped, wrapping around."""
        if len(members) == 0:
            return members[:0]
        start = ((epoch - 1) * size) % len(members)
        return members[np.arange(start, start + size) % len(members)]

    def _mixed(self, members: list[np.ndarray], full_epoch: int) -> np.ndarray:
        """RETURNN's "random_dataset": each dataset's turn drawn by Python's ``random`` with the epoch's seed."""
        turns = [d for d, m in enumerate(members) for _ in range(len(m))]
        seed = self.data_seed if self.data_seed is not None else full_epoch + self.random_seed_offset
        random.Random(seed).shuffle(turns)
        taken = [0] * len(members)
        joint = []
        for d in turns:
            joint.append(members[d][taken[d]])
            taken[d] += 1
        return np.array(joint, dtype=np.int64)


def _check_data_map(data_map: Any, datasets: Any) -> dict[tuple[str, str], str]:
    if not isinstance(datasets, dict) or not datasets:
        raise ConfigError("CombinedDataset: 'datasets' must be a non-empty dict {name: dataset dict}.")
    if not isinstance(data_map, dict) or not data_map:
        raise ConfigError("CombinedDataset: 'data_map' must be a non-empty dict {(dataset name, its key): key}.")
    checked = {}
    for source, key in data_map.items():
        if not (isinstance(source, tuple) and len(source) == 2 and all(isinstance(v, str) for v in source)):
            hint = (
                " (that is MetaDataset's direction; CombinedDataset maps the other way)"
                if isinstance(source, str)
                else ""
            )
            raise ConfigError(
                f"CombinedDataset: data_map key {source!r} must be (dataset name, key in that dataset), mapped to this "
                f"dataset's key{hint}, e.g. {{('asr', 'data'): 'data'}}."
            )
        if source[0] not in datasets:
            raise ConfigError(f"CombinedDataset: data_map names dataset {source[0]!r}, not one of {sorted(datasets)}.")
        if not isinstance(key, str):
            raise ConfigError(f"CombinedDataset: data_map[{source!r}] must be a key name (str), got {key!r}.")
        checked[source] = key
    return checked


DATASETS = (CombinedDataset,)
