"""Observation never perturbs: a dataset that draws from a generator of its own in get_batch (augmentation) draws
the same during training whether or not the startup checks read batches from it first (data_checks.sample_batches
keeps the generators it holds: framework.base.rng.objects_random_state_kept)."""

from __future__ import annotations

import random

import numpy as np
import torch

from framework.base.rng import objects_random_state_kept
from framework.check_library.data_checks import sample_batches
from framework.datasets.numpy_dataset import NumpyDataset


class Flipping(NumpyDataset):
    def __init__(self):
        super().__init__({"data": np.arange(40, dtype=np.float32).reshape(20, 2)})
        self.rng = np.random.default_rng(3)
        self.inner = {"python": random.Random(4), "torch": torch.Generator().manual_seed(5)}

    def get_batch(self, indices):
        batch = super().get_batch(indices)
        batch["data"] = batch["data"] * np.where(self.rng.random(len(indices)) < 0.5, -1, 1)[:, None]
        return batch


class _Loader:
    def __init__(self, dataset):
        self.dataset = dataset

    def plan(self, epoch):
        return [np.arange(i, i + 4) for i in range(0, 20, 4)]


def test_reading_batches_for_the_checks_leaves_the_datasets_own_draws_as_they_were():
    read, fresh = Flipping(), Flipping()
    assert len(sample_batches(_Loader(read), 3)) == 3
    np.testing.assert_array_equal(read.get_batch(np.arange(4))["data"], fresh.get_batch(np.arange(4))["data"])


def test_generators_held_in_nested_containers_are_restored_too():
    dataset = Flipping()
    before = (dataset.inner["python"].random(), torch.rand(1, generator=dataset.inner["torch"]))
    dataset = Flipping()
    with objects_random_state_kept(dataset):
        dataset.rng.random(5), dataset.inner["python"].random(), torch.rand(1, generator=dataset.inner["torch"])
    assert (dataset.inner["python"].random(), torch.rand(1, generator=dataset.inner["torch"])) == before
