"""RETURNN's ``MetaDataset``: the keys of several datasets over the same sequences, matched by sequence tag.

``data_map = {"data": ("zip", "data"), "classes": ("align", "data")}`` gives this dataset's key ``data`` from
dataset ``zip``'s key ``data`` and ``classes`` from ``align``'s ``data``. The sequences are those of the default
dataset (``seq_order_control_dataset``, else the one of ``data_map["data"]``), or those a ``seq_list_file``
lists; every dataset contributes the sequence with the same tag, wherever it is in that dataset (a tag one
lacks is an error at startup, as in RETURNN).

Ordering, as in RETURNN: with ``seq_order_control_dataset``, that dataset's ``seq_ordering`` and
``partition_epoch`` (where it sets no ``seq_ordering``, MetaDataset's applies to it; RETURNN ignores
MetaDataset's there); without, MetaDataset's own, "sorted" and "laplace" by the default dataset's lengths.
"""

from __future__ import annotations

import gzip
import json
import pickle
from typing import Any

import numpy as np

from framework.base.errors import ConfigError
from framework.base.safe_create import refuse_special
from framework.datasets.base import Dataset
from framework.datasets.data_dims import check_data_dims
from framework.datasets.registry import init_dataset


class MetaDataset(Dataset):
    """Keys from several datasets, sequences matched by tag.

    :param datasets: ``{name: dataset dict}``; only those that ``data_map`` names are built (as in RETURNN).
    :param data_map: ``{key: (dataset name, key in that dataset)}``.
    :param seq_order_control_dataset: the dataset whose sequences and order an epoch has.
    :param seq_list_file: the sequences, by tag: a text file (one tag per line) or a pickled list, the same tags
        in every dataset; or a pickled dict, or a dict of such files, ``{dataset name: tags}`` (the i-th tags of
        all lists are one sequence). Optionally gzipped.
    :param seq_lens_file: RETURNN's JSON ``{tag: {key: length}}``: "sorted" and "laplace" sort by its ``data``
        lengths (without ``seq_order_control_dataset``).
    :param data_dims: RETURNN's ``{key: (dim, ndim)}``, checked against the data; ``data_dtypes``: unused (as in
        RETURNN).
    """

    def __init__(
        self,
        datasets: dict[str, Any],
        data_map: dict[str, tuple[str, str]],
        *,
        seq_order_control_dataset: str | None = None,
        seq_list_file: str | dict[str, str] | None = None,
        seq_lens_file: str | None = None,
        data_dims: dict[str, Any] | None = None,
        data_dtypes: dict[str, str] | None = None,
        **kwargs: Any,
    ):
        super().__init__(**kwargs)
        self.seq_lens_file = seq_lens_file
        self.data_map = _check_data_map(data_map, datasets)
        if seq_order_control_dataset is None and "data" not in self.data_map:
            raise ConfigError(
                "MetaDataset: give seq_order_control_dataset (the dataset whose sequences and order an epoch has), or "
                "a 'data' key in data_map, whose dataset then decides."
            )
        self.controlled = seq_order_control_dataset is not None
        self.control = seq_order_control_dataset or self.data_map["data"][0]
        used = sorted({name for name, _ in self.data_map.values()} | {self.control})
        if self.control not in datasets:
            raise ConfigError(
                f"MetaDataset: seq_order_control_dataset {self.control!r} is not one of {sorted(datasets)}."
            )
        spec = datasets[self.control]
        self._control_orders_itself = not isinstance(spec, dict) or "seq_ordering" in spec
        self.datasets: dict[str, Dataset] = {
            name: init_dataset(
                datasets[name], option=f"MetaDataset datasets[{name!r}]", random_seed=self.random_seed, parent=self
            )
            for name in used
        }
        for key, (name, sub_key) in self.data_map.items():
            if sub_key not in self.datasets[name].key_info():
                raise ConfigError(
                    f"MetaDataset: data_map[{key!r}] = ({name!r}, {sub_key!r}), but {self.datasets[name].name} has the "
                    f"keys {', '.join(self.datasets[name].key_info())}."
                )
        if seq_list_file is None:
            control = self.datasets[self.control]
            tags = {name: [control.seq_tag(i) for i in range(control.num_seqs)] for name in used}
        else:
            tags = _read_seq_lists(seq_list_file, used)
        self._tags = tags[self.control]
        # per dataset: its sequence index of each of this dataset's sequences
        self._rows = {name: self._match(name, tags[name]) for name in used}
        self.name = f"MetaDataset({', '.join(f'{name}: {self.datasets[name].name}' for name in used)})"
        check_data_dims("MetaDataset", self.key_info(), data_dims)
        del data_dtypes  # RETURNN does not use it either

    def _match(self, name: str, tags: list[str]) -> np.ndarray:
        dataset = self.datasets[name]
        index = {dataset.seq_tag(i): i for i in range(dataset.num_seqs)}
        missing = [tag for tag in tags if tag not in index]
        if missing:
            raise ConfigError(
                f"MetaDataset: dataset {name!r} ({dataset.name}) has no sequence tagged {missing[0]!r} ({len(missing)} "
                f"of {len(tags)} tags missing; {name!r} has e.g. {dataset.seq_tag(0)!r}). The datasets must hold the same "
                f"sequences under the same tags (or give seq_list_file with each dataset's tags)."
            )
        return np.array([index[tag] for tag in tags], dtype=np.int64)

    @property
    def num_seqs(self) -> int:
        return len(self._tags)

    @property
    def returnn_sortable(self) -> bool:  # type: ignore[override]
        # RETURNN's class says it sorts when its controlling dataset does, but then that dataset's own order applies
        # (its init_seq_order ignores MetaDataset's): a forward run's "sorted_reverse" changes nothing there. Without
        # one it sorts by a seq_lens_file only.
        return not self.controlled and bool(self.seq_lens_file or self.seq_order_seq_lens_file)

    @property
    def returnn_eval_sorted(self) -> bool:  # type: ignore[override]
        return self.returnn_sortable  # a dev/eval "sorted" likewise

    def key_info(self) -> dict[str, dict[str, Any]]:
        return {key: self.datasets[name].key_info()[sub_key] for key, (name, sub_key) in self.data_map.items()}

    def seq_tag(self, index: int) -> str:
        return self._tags[index]

    def use_epoch(self, epoch: int) -> None:
        for dataset in self.datasets.values():
            dataset.use_epoch(epoch)

    def get_seq_order(self, epoch: int) -> np.ndarray:
        if not self.controlled:
            return super().get_seq_order(epoch)
        control = self.datasets[self.control]
        if not self._control_orders_itself:
            control.seq_ordering = self.seq_ordering
        if control.partition_epoch > 1 or self.partition_epoch == 1:
            order = control.get_seq_order(epoch)
        else:
            full_epoch, part = divmod(epoch - 1, self.partition_epoch)
            order = np.array_split(control.get_seq_order(full_epoch + 1), self.partition_epoch)[part]
        rows = self._rows[self.control]
        if len(rows) == control.num_seqs and (rows == np.arange(len(rows))).all():
            return self.filtered(order)
        position = {int(row): i for i, row in enumerate(rows)}  # a seq_list_file's subset and order
        return self.filtered(np.array([position[int(c)] for c in order if int(c) in position], dtype=np.int64))

    def order_lengths(self) -> np.ndarray:
        if self.seq_lens_file is not None:
            return _lengths_from_file(self.seq_lens_file, self._tags)
        return self.datasets[self.control].order_lengths()[self._rows[self.control]]

    def seq_lengths(self) -> np.ndarray:
        lengths = [self.datasets[name].seq_lengths()[rows] for name, rows in self._rows.items()]
        return np.max(lengths, axis=0)

    def get_seq(self, index: int) -> dict[str, np.ndarray]:
        seqs = {name: self.datasets[name].get_seq(int(rows[index])) for name, rows in self._rows.items()}
        return {key: seqs[name][sub_key] for key, (name, sub_key) in self.data_map.items()}

    def get_batch(self, indices: np.ndarray) -> dict[str, np.ndarray]:
        batches = {name: self.datasets[name].get_batch(rows[indices]) for name, rows in self._rows.items()}
        batch = {}
        for key, (name, sub_key) in self.data_map.items():
            batch[key] = batches[name][sub_key]
            if sub_key + ":seq_len" in batches[name]:
                batch[key + ":seq_len"] = batches[name][sub_key + ":seq_len"]
        return batch

    def __repr__(self) -> str:
        return f"<{self.name}: {self.num_seqs} seqs>"


def _lengths_from_file(path: str, tags: list[str]) -> np.ndarray:
    """The ``data`` length of each of ``tags`` in RETURNN's ``seq_lens_file`` (JSON ``{tag: {key: length}}``)."""
    refuse_special(path, "the seq_lens_file of MetaDataset")
    try:
        with open(path, encoding="utf8") as f:
            lengths = json.load(f)
        return np.array([lengths[tag]["data"] for tag in tags])
    except (OSError, ValueError) as exc:
        raise ConfigError(f"MetaDataset: cannot read seq_lens_file {path!r} as JSON ({exc}).") from None
    except (KeyError, TypeError) as exc:
        raise ConfigError(
            f"MetaDataset: seq_lens_file {path!r} gives no 'data' length for {exc} (it maps every tag to "
            f"{{'data': length, ...}})."
        ) from None


def _check_data_map(data_map: Any, datasets: Any) -> dict[str, tuple[str, str]]:
    if not isinstance(datasets, dict) or not datasets:
        raise ConfigError("MetaDataset: 'datasets' must be a non-empty dict {name: dataset dict}.")
    if not isinstance(data_map, dict) or not data_map:
        raise ConfigError("MetaDataset: 'data_map' must be a non-empty dict {key: (dataset name, its key)}.")
    checked = {}
    for key, value in data_map.items():
        if not (isinstance(value, (tuple, list)) and len(value) == 2 and all(isinstance(v, str) for v in value)):
            raise ConfigError(f"MetaDataset: data_map[{key!r}] = {value!r}; give (dataset name, key in that dataset).")
        if value[0] not in datasets:
            raise ConfigError(
                f"MetaDataset: data_map[{key!r}] names dataset {value[0]!r}, not one of {sorted(datasets)}."
            )
        checked[key] = (value[0], value[1])
    return checked


def _read_seq_lists(seq_list_file: str | dict[str, str], names: list[str]) -> dict[str, list[str]]:
    """Each dataset's list of tags, as RETURNN reads ``seq_list_file``."""
    if isinstance(seq_list_file, dict):
        lists = {name: _read_tags(seq_list_file[name]) for name in names if name in seq_list_file}
    else:
        content = _read_tags(seq_list_file)
        lists = content if isinstance(content, dict) else {name: content for name in names}
    missing = [name for name in names if name not in lists]
    if missing:
        raise ConfigError(f"MetaDataset: seq_list_file has no list of tags for dataset(s) {', '.join(missing)}.")
    lengths = {name: len(lists[name]) for name in names}
    if len(set(lengths.values())) != 1:
        raise ConfigError(
            f"MetaDataset: the seq_list_file lists have different lengths {lengths}; the i-th tags of all "
            f"lists are one sequence."
        )
    return {name: list(lists[name]) for name in names}


def _read_tags(path: str) -> Any:
    """A list of tags (text, one per line, or pickled), or a pickled dict of lists; optionally gzipped."""
    opener = gzip.open if path.endswith(".gz") else open
    try:
        if path.removesuffix(".gz").endswith(".pkl"):
            with opener(path, "rb") as f:
                return pickle.load(f)
        with opener(path, "rt", encoding="utf8") as f:
            return f.read().splitlines()
    except (OSError, pickle.UnpicklingError, EOFError) as exc:
        raise ConfigError(f"MetaDataset: cannot read seq_list_file {path!r} ({exc}).") from None


DATASETS = (MetaDataset,)
