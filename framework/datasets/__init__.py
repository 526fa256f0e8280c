"""Datasets, batching and ``extern_data``.

A dataset is configured as ``{"class": "Name", **kwargs}`` with a framework class name, a
``"module.Class"`` path or a callable; or given as a ``Dataset`` instance or a callable that
returns one. The classes a config names are those the dataset modules declare (``DATASETS``), and those of
installed packages (``framework.datasets`` entry points); the framework's are importable from here too.
"""

from __future__ import annotations

from framework.base.options import register
from framework.datasets.base import Dataset
from framework.datasets.combined import CombinedDataset
from framework.datasets.concat import ConcatDataset
from framework.datasets.distribute_files import DistributeFilesDataset
from framework.datasets.generating import CopyTaskDataset, DummyDataset
from framework.datasets.hdf import HDFDataset
from framework.datasets.lm import LmDataset
from framework.datasets.meta import MetaDataset
from framework.datasets.mnist import MnistDataset
from framework.datasets.multi_proc import MultiProcDataset
from framework.datasets.numpy_dataset import NumpyDataset
from framework.datasets.ogg_zip import OggZipDataset
from framework.datasets.postprocessing import PostprocessingDataset
from framework.datasets.registry import dataset_classes, init_dataset
from framework.datasets.static import StaticDataset
from framework.datasets.synthetic import GaussianClustersDataset, ObjectPatchesDataset, SyntheticRegressionDataset
from framework.datasets.task12ax import Task12AXDataset
from framework.datasets.text import CharTextDataset

register(
    "extern_data",
    "dict | None",
    None,
    "Batch keys: {key: {shape, dtype, sparse_dim}}; None axes are variable-length. None: take from the train dataset.",
    __name__,
)
register(
    "train", "any", None, "Training dataset: {'class': Name, ...}, 'module.Class' dict, callable or Dataset.", __name__
)
register(
    "dev", "any", None, "Development dataset, scored after each epoch; drives newbob learning-rate control.", __name__
)
register("eval", "any", None, "Evaluation dataset, scored after each epoch and used by task=eval/forward.", __name__)
register(
    "chunking",
    "any",
    None,
    "RETURNN's chunking: cut every sequence of the train and dev/eval datasets into chunks, each a sequence of its "
    "own: 'size:step', an int, (size, step), or dicts {key: frames} per key (framework.datasets.chunking). None: off.",
    __name__,
)
register("min_chunk_size", "int | dict", 0, "With chunking: drop chunks shorter than this (RETURNN's).", __name__)
register(
    "online_shuffle_batches",
    "int | dict | None",
    None,
    "RETURNN's: the train batches in consecutive blocks of this many, each block in a random order "
    "({'buffer_size': N, 'seed': S} as RETURNN takes it). None: off.",
    __name__,
)
register(
    "batch_size",
    "int | float | dict",
    1000,
    "Max padded frames per batch (max sequence length x number of sequences; non-sequence data: one per entry); "
    "a dict {key: N} limits each named key's padded frames (RETURNN's per-key batch_size). A float is taken as "
    "RETURNN takes it (1920 * 16000 / 8).",
    __name__,
    range="[1, inf)",
)
register(
    "max_seq_length",
    "int | dict | None",
    None,
    "Leave out sequences longer than this (every dataset, as in RETURNN's torch engine); a dict {key: N} checks the "
    "named keys only.",
    __name__,
    range="[0, inf)",
)
register(
    "min_seq_length",
    "int | dict | None",
    None,
    "Leave out sequences shorter than this (every dataset); a dict {key: N} checks the named keys only.",
    __name__,
    range="[0, inf)",
)
register("max_seqs", "int | None", None, "Max sequences per batch (None: no cap).", __name__, range="[1, inf)")
register(
    "packed_batch_size",
    "int | dict | None",
    None,
    "RETURNN's limit on a batch's summed frames without padding (every key's sum; a dict {key: N}: the keys it "
    "names), applied together with batch_size and max_seqs as RETURNN's torch engine applies it. None: no limit.",
    __name__,
)
register(
    "packed_batch_cost",
    "dict | None",
    None,
    "RETURNN's per-sequence costs: {name: function}, each called with a sequence's lengths (RETURNN's NumbersDict of "
    "every key's first axis), a batch's sum of each cost bounded by the packed_batch_size entry of its name (which "
    "must be given), as RETURNN's torch engine bounds it. None: no costs.",
    __name__,
)
# RETURNN's torch engine reads each of these as f"{key}_{'train' if train else 'dev'}" over the plain key
register(
    "batch_size_train",
    "int | float | dict | None",
    None,
    "RETURNN's: batch_size for the train dataset, as RETURNN's torch engine reads it. None: batch_size.",
    __name__,
)
register(
    "packed_batch_size_train",
    "int | dict | None",
    None,
    "RETURNN's: packed_batch_size for the train dataset, as RETURNN's torch engine reads it. None: packed_batch_size.",
    __name__,
)
register(
    "packed_batch_cost_train",
    "dict | None",
    None,
    "RETURNN's: packed_batch_cost for the train dataset, as RETURNN's torch engine reads it. None: packed_batch_cost.",
    __name__,
)
register(
    "batch_size_dev",
    "int | float | dict | None",
    None,
    "RETURNN's: batch_size for every other dataset (dev, eval, eval_datasets, forward), as RETURNN's torch engine reads it. None: batch_size.",
    __name__,
)
register(
    "packed_batch_size_dev",
    "int | dict | None",
    None,
    "RETURNN's: packed_batch_size for every other dataset (dev, eval, eval_datasets, forward), as RETURNN's torch engine reads it. None: packed_batch_size.",
    __name__,
)
register(
    "packed_batch_cost_dev",
    "dict | None",
    None,
    "RETURNN's: packed_batch_cost for every other dataset (dev, eval, eval_datasets, forward), as RETURNN's torch engine reads it. None: packed_batch_cost.",
    __name__,
)
register(
    "torch_batching",
    "any",
    None,
    "RETURNN's custom batching: a callable (dataset, *, train, **kwargs) that yields the batches (lists of the "
    "sequences' data dicts) of the stream of the epoch's sequences, or a dict naming a class of RETURNN's torch data "
    "pipeline ({'class': 'BucketOrderingIterDataPipe', ...}); it replaces batch_size, max_seqs and the packed limits, "
    "as in RETURNN (framework.datasets.custom_batching). None: those options batch.",
    __name__,
)
register(
    "use_dummy_datasets",
    "bool",
    False,
    "RETURNN's: replace the train, dev, eval, forward_data and eval_datasets data by DummyGenericDataset over "
    "extern_data (RETURNN's random data), as RETURNN's setup_dummy_datasets does (generating.dummy_dataset_specs).",
    __name__,
)
register(
    "dummy_dataset_num_seqs",
    "int | None",
    None,
    "With use_dummy_datasets: the sequences of the dev/eval/forward dummy datasets (None: train's / 20, or 100), and "
    "of train where train_dummy_dataset_num_seqs is not set.",
    __name__,
)
register(
    "train_dummy_dataset_num_seqs",
    "int | None",
    None,
    "With use_dummy_datasets: the sequences of the train dummy dataset (None: dummy_dataset_num_seqs, else 1000).",
    __name__,
)
register(
    "batching",
    "str | None",
    None,
    "RETURNN's name for the train dataset's seq_ordering (random, sorted, laplace:N, sort_bin_shuffle:.N, ...) when "
    "its dict sets none. Neither set: a RETURNN config's train dataset keeps its default order, as in RETURNN; a "
    "config for this framework's is shuffled ('random').",
    __name__,
)
register(
    "torch_dataloader_opts",
    "dict | None",
    None,
    "Options for torch.utils.data.DataLoader, e.g. {'num_workers': 2, 'pin_memory': True}; None: load in the main process.",
    __name__,
)
register(
    "torch_dataloader_shard_workers",
    "bool | None",
    None,
    "RETURNN's: with torch_dataloader_opts num_workers N > 1, each worker batches its own shard of the sequences (the "
    "sub-epoch's N contiguous pieces, as RETURNN's Dataset.set_sharding cuts them) and the batches come from the "
    "workers in turn (True), or every worker batches all sequences, so every batch comes N times (False). None: in "
    "a RETURNN config (one that sets backend or behavior_version) True from behavior_version 37 on, as in RETURNN; "
    "in a config for this framework the batches are planned once and the workers only read them.",
    __name__,
)
register(
    "behavior_version",
    "int | None",
    None,
    "RETURNN's behavior version. Here it gives torch_dataloader_shard_workers' default (37 or more: True); what else "
    "it changes is RETURNN's own layers and frontend, which ported model code does not use.",
    __name__,
)


__all__ = [
    "Dataset",
    "init_dataset",
    "dataset_classes",
    "NumpyDataset",
    "HDFDataset",
    "MnistDataset",
    "Task12AXDataset",
    "SyntheticRegressionDataset",
    "GaussianClustersDataset",
    "ObjectPatchesDataset",
    "CharTextDataset",
    "ConcatDataset",
    "DistributeFilesDataset",
    "MetaDataset",
    "OggZipDataset",
    "MultiProcDataset",
    "LmDataset",
    "StaticDataset",
    "CopyTaskDataset",
    "DummyDataset",
    "CombinedDataset",
    "PostprocessingDataset",
]
