"""Datasets, batching and ``extern_data``.

A dataset is configured as ``{"class": "Name", **kwargs}`` with a framework class name, a
``"module.Class"`` path or a callable; or given as a ``Dataset`` instance or a callable that
returns one. The classes a config names are those the dataset modules declare (``DATASETS``), and those of
installed packages (``framework.datasets`` entry points); the framework's are importable from here too.
"""

from __future__ import annotations

from framework.datasets.base import Dataset
from framework.datasets.concat import ConcatDataset
from framework.datasets.distribute_files import DistributeFilesDataset
from framework.datasets.hdf import HDFDataset
from framework.datasets.meta import MetaDataset
from framework.datasets.mnist import MnistDataset
from framework.datasets.multi_proc import MultiProcDataset
from framework.datasets.numpy_dataset import NumpyDataset
from framework.datasets.ogg_zip import OggZipDataset
from framework.datasets.registry import dataset_classes, init_dataset
from framework.datasets.synthetic import GaussianClustersDataset, ObjectPatchesDataset, SyntheticRegressionDataset
from framework.datasets.task12ax import Task12AXDataset
from framework.datasets.text import CharTextDataset

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
]
