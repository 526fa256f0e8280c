"""Dataset classes by name, and building a dataset from what a config gives (``{"class": ...}``).

Apart from the package, so that datasets that build other datasets (``DistributeFilesDataset``,
``ConcatDataset``) can use it. A dataset module lists its classes in ``DATASETS = (...)``; the modules are found
as options and plugins are (``framework.base.declarations``), installed packages' through the ``framework.datasets``
entry points.
"""

from __future__ import annotations

import difflib
import importlib
from typing import Any

from framework.base import declarations
from framework.base.config import get_global_config
from framework.base.errors import ConfigError
from framework.base.options import register
from framework.base.util import accepted_kwargs, check_kwargs, import_by_name
from framework.datasets.base import SEQ_ORDERINGS, Dataset, valid_seq_ordering
from framework.datasets.context_window import window_size, with_window

register(
    "dataset_random_seed_offset",
    "int",
    0,
    "RETURNN's option: the random_seed_offset of every dataset that does not set its own (its shuffling seed is "
    "shifted by it), sub-datasets included.",
    __name__,
)

register(
    "window",
    "int | None",
    None,
    "RETURNN's context window: the window of every train, dev and eval dataset dict that sets none (a dict's "
    "'window': None takes it too); where the dataset's class stacks frames (HDFDataset, DummyDataset, "
    "Task12AXDataset, TaskEpisodicCopyDataset), each frame of its 'data' [T, F] becomes the window's frames around "
    "it, [T, window * F], zeros beyond the ends, as RETURNN's Dataset._sliding_window (an even window grows by one); "
    "RETURNN's eval_datasets and forward_data dicts do not get it. None, 0 or 1: off.",
    __name__,
    range="[0, inf)",
)

_CLASSES: dict[str, type[Dataset]] = {}

#: RETURNN's datasets that run RASR (Sprint) or read its caches: refused with a way forward.
RASR_DATASETS = ("ExternSprintDataset", "SprintDataset", "SprintDatasetBase", "SprintCacheDataset")


def dataset_classes() -> dict[str, type[Dataset]]:
    """The dataset classes a config can name, by class name: those the modules that declare ``DATASETS`` list (the
    framework's, then installed packages'), imported on first use."""
    if not _CLASSES:
        for module in declarations.declaring_modules("datasets", __package__):
            _CLASSES.update((cls.__name__, cls) for cls in importlib.import_module(module).DATASETS)
    return _CLASSES


def _resolve_class(name: Any, option: str) -> Any:
    if callable(name):
        return name
    if not isinstance(name, str):
        raise ConfigError(f"{option}['class'] must be a class name, 'module.Class' or a callable, got {name!r}.")
    known = dataset_classes()
    if name in known:
        return known[name]
    if name in RASR_DATASETS:
        raise ConfigError(
            f"{option}: RETURNN's {name} needs RASR (Sprint), the RWTH speech toolkit, which runs its feature "
            f"extraction and alignment itself; it is not available here. Dump the data once with RETURNN where RASR is "
            f"installed (RETURNN's tools/dump-dataset.py with --type hdf, or i6_core's ReturnnDumpHDFJob) and read the "
            f"HDF files with {{'class': 'HDFDataset', 'files': [...]}} (a MetaDataset combines them with other data); "
            f"for audio with transcriptions, an ogg zip (i6_core's BlissToOggZipJob) read by OggZipDataset."
        )
    if "." in name:
        return import_by_name(name, option)
    close = difflib.get_close_matches(name, list(known), n=1, cutoff=0.5)
    hint = f" Did you mean {close[0]!r}?" if close else ""
    raise ConfigError(
        f"{option}: unknown dataset class {name!r}.{hint} Known: {', '.join(known)}; "
        f"or give 'module.Class' or a callable."
    )


def _construct(cls: type, kwargs: dict[str, Any], option: str) -> Dataset:
    """``cls(**kwargs)``; a built-in dataset refusing its parameters is a config error (a user's class raises as is)."""
    if not cls.__module__.startswith("framework."):
        return cls(**kwargs)
    try:
        return cls(**kwargs)
    except (ValueError, TypeError) as exc:
        raise ConfigError(
            f"{option}: {cls.__name__} cannot be built with {kwargs} ({type(exc).__name__}: {exc}). Check its "
            f"parameters (sizes and counts at least 1, probabilities in [0, 1])."
        ) from None


def _default_seed_offset() -> int:
    """``dataset_random_seed_offset`` of the run's config; 0 outside a run (a dataset built by a test or a tool)."""
    try:
        return get_global_config().int("dataset_random_seed_offset")
    except ConfigError:  # no config loaded
        return 0


def init_dataset(
    spec: Any,
    *,
    option: str,
    random_seed: int | None,
    train_ordering: str | None = None,
    window: int | None = None,
    parent: Dataset | None = None,
    returnn_eval: bool = False,
    rank_offset: int = 0,
) -> Dataset:
    """Build the dataset that option ``option`` (train, dev, ...) describes.

    ``random_seed``: the run's, for a config for this framework; None for a RETURNN config: the datasets order their
    sequences as RETURNN's (seeded by the epoch and ``random_seed_offset``, ``Dataset``), and a train dataset that
    sets no ``seq_ordering`` (nor ``batching``) keeps its default order, as in RETURNN (here otherwise "random").
    ``train_ordering`` (RETURNN's ``batching``) is the train dataset's seq_ordering unless it sets its own;
    ``window`` (the config's, for train, dev and eval) is a dataset dict's window unless it sets its own.
    ``parent``: the dataset that builds this one from its dict; with RETURNN's seeding, its ``random_seed_offset``
    is this one's unless it sets its own (RETURNN's ``init_dataset(parent_dataset=...)``).
    ``returnn_eval``: the config's ``dev`` or ``eval`` dataset; with RETURNN's seeding it is ordered as RETURNN's
    ``__main__.load_data`` gives it (``Dataset.get_default_kwargs_eval``): "sorted" when its dict sets no
    ``seq_ordering`` (where RETURNN's class sorts, ``Dataset.returnn_eval_sorted``; ``batching`` does not apply then),
    ``batching`` (else "default") when the dict sets ``seq_ordering`` None.
    ``rank_offset``: added to the default ``random_seed_offset`` (RETURNN's rank x 16127 of torch_distributed's
    "random_seed_offset" distribution); not to a dataset that shards by rank itself (``distrib_shard_files``).
    """
    if parent is not None and parent.returnn_seeding:
        random_seed = None
    if isinstance(spec, Dataset):
        dataset = spec
    elif isinstance(spec, str):
        return init_dataset(
            {"class": spec},
            option=option,
            random_seed=random_seed,
            train_ordering=train_ordering,
            window=window,
            parent=parent,
            returnn_eval=returnn_eval,
        )
    elif callable(spec) and not isinstance(spec, dict):
        dataset = spec()
    elif isinstance(spec, dict):
        kwargs = dict(spec)
        if "class" not in kwargs:
            raise ConfigError(
                f"{option} = {spec!r} has no 'class'; e.g. {{'class': 'MnistDataset', 'split': 'train'}}."
            )
        cls = _resolve_class(kwargs.pop("class"), option)
        accepted = accepted_kwargs(cls)
        if accepted is not None and "name" not in accepted:
            kwargs.pop("name", None)  # RETURNN's Dataset(name=...) labels its log lines only
        if kwargs.get("window", 0) is None:
            del kwargs["window"]  # RETURNN's kwargs_update_from_config: None takes the config's
        if window not in (None, 0, 1) and "window" not in kwargs and (accepted is None or "window" in accepted):
            kwargs["window"] = window
        check_kwargs(cls, kwargs, option)
        mode = getattr(cls, "returnn_window", None)
        frames = window_size(kwargs.pop("window"), f"{option} ({cls.__name__})") if mode and "window" in kwargs else 1
        if accepted is not None and "random_seed" in accepted:
            kwargs.setdefault("random_seed", random_seed)
        if random_seed is None and parent is not None and accepted is not None and "random_seed_offset" in accepted:
            kwargs.setdefault("random_seed_offset", parent.random_seed_offset)
        # RETURNN's Dataset._get_default_random_seed_offset: the global config's offset when the dataset gives none
        # (sub-datasets too), plus the rank's under torch_distributed unless it shards by rank itself
        offset = _default_seed_offset() + (0 if kwargs.get("distrib_shard_files") else rank_offset)
        if accepted is not None and "random_seed_offset" in accepted and offset:
            kwargs.setdefault("random_seed_offset", offset)
        dataset = with_window(_construct(cls, kwargs, option), mode, frames, option)
    else:
        raise ConfigError(f"{option} must be a dataset dict, a Dataset or a callable returning one, got {spec!r}.")
    if not isinstance(dataset, Dataset):
        raise ConfigError(f"{option} did not produce a framework.datasets.Dataset but {type(dataset).__name__}.")
    if dataset.sharded_by_rank and option != "train":
        raise ConfigError(
            f"{option}: {dataset.name} gives every rank only its own files (distrib_shard_files), which only the train "
            f"dataset can do: an evaluation splits its batches over the ranks itself. Leave distrib_shard_files out of "
            f"{option}."
        )
    given = spec.get("seq_ordering", _ABSENT) if isinstance(spec, dict) else _ABSENT
    if returnn_eval and random_seed is None and given is _ABSENT and dataset.seq_ordering is None:
        # RETURNN's load_data gives a dev/eval dataset seq_ordering="sorted" before the dict's own options and the
        # config's batching (which then no longer applies: RETURNN sets it only where the key is missing)
        dataset.seq_ordering = "sorted" if dataset.returnn_eval_sorted else "default"
    if dataset.seq_ordering is None:
        # the train dataset takes batching; so does a RETURNN dev/eval dict that sets seq_ordering None (RETURNN's
        # kwargs_update_from_config drops the None, then fills the key from batching)
        takes_batching = option == "train" or (returnn_eval and random_seed is None)
        if takes_batching and train_ordering is not None and not valid_seq_ordering(train_ordering):
            raise ConfigError(
                f"batching = {train_ordering!r} is not one of {', '.join(SEQ_ORDERINGS)} (RETURNN takes a function "
                f"only as a dataset dict's seq_ordering)."
            )
        # RETURNN's train default is the dataset's own order ("default"); a config for this framework shuffles
        shuffled = "random" if random_seed is not None and option == "train" else "default"
        dataset.seq_ordering = (train_ordering or shuffled) if takes_batching else "default"
    return dataset


_ABSENT = object()  # a dataset dict without the key (RETURNN tells it apart from one that sets it None)
