"""RETURNN's sequence orderings (``Dataset.get_seq_order_for_epoch``) against RETURNN's own HDFDataset on HDF files
written by RETURNN's SimpleHDFWriter: for every ordering family, several epochs, partition_epoch 1 and 3, the same
sequence tags in the same order, with RETURNN's seeding (the epoch and ``random_seed_offset``, ``fixed_random_seed``)
as a RETURNN config gets it (``random_seed=None``). A config for this framework keeps its own draws."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from framework.base.config import Config
from framework.core.build import init_data
from framework.datasets import init_dataset

pytest.importorskip("returnn")

from test_returnn_datasets_more import write_returnn_hdf  # noqa: E402

# ties on purpose: the sorts are stable in RETURNN and here
LENGTHS_A = [4, 2, 6, 3, 5, 1, 7, 2, 3, 4, 5, 6, 2]
LENGTHS_B = [3, 7, 1, 4, 4, 2, 8, 5, 3, 1]

ORDERINGS = (
    "default",
    "reverse",
    "default_every_n:4",
    "sorted",
    "sorted_reverse",
    "random",
    "random:2",
    "random_sample",
    "laplace",
    "laplace:3",
    "laplace:.4",
    "laplace:.5:2",
    "laplace:40",
    "sort_bin_shuffle",
    "sort_bin_shuffle:3",
    "sort_bin_shuffle:.4",
    "sort_bin_shuffle:.4:2",
    "sort_bin_shuffle_x2",
    "sort_bin_shuffle_x2:.5",
    "sort_bin_shuffle_x2:3:3",
)


@pytest.fixture(scope="module")
def hdf(tmp_path_factory) -> dict:
    tmp = tmp_path_factory.mktemp("orderings")
    first = write_returnn_hdf(tmp / "a.hdf", [f"a/{i}" for i in range(len(LENGTHS_A))], LENGTHS_A, seed=1)
    second = write_returnn_hdf(tmp / "b.hdf", [f"b/{i}" for i in range(len(LENGTHS_B))], LENGTHS_B, seed=2)
    return {"class": "HDFDataset", "files": [first, second]}


def returnn_tags(spec: dict, epochs) -> list[list[str]]:
    """The tags of each epoch in the order RETURNN's dataset of ``spec`` gives them (no global config: offset 0)."""
    from returnn.config import Config as ReturnnConfig
    from returnn.config import global_config_ctx
    from returnn.datasets.basic import init_dataset as returnn_init_dataset

    with global_config_ctx(ReturnnConfig({})):
        dataset = returnn_init_dataset(dict(spec))
        got = []
        for epoch in epochs:
            dataset.init_seq_order(epoch=epoch)
            got.append([dataset.get_tag(i) for i in range(dataset.num_seqs)])
    return got


def our_tags(spec: dict, epochs, random_seed: int | None = None) -> list[list[str]]:
    dataset = init_dataset(dict(spec), option="train", random_seed=random_seed)
    return [[dataset.seq_tag(int(i)) for i in dataset.get_seq_order(epoch)] for epoch in epochs]


def test_every_ordering_gives_returnns_tags_in_returnns_order_over_epochs_and_partitions(hdf):
    """20 orderings x partition_epoch 1 and 3 x 6 (sub-)epochs: 240 epochs of 23 sequences, all equal."""
    compared = 0
    for ordering in ORDERINGS:
        for partition in (1, 3):
            spec = {**hdf, "seq_ordering": ordering, "partition_epoch": partition}
            epochs = range(1, 7)
            theirs = returnn_tags(spec, epochs)
            assert our_tags(spec, epochs) == theirs, spec
            compared += len(theirs)
            if partition == 1 and ordering.startswith(("random", "laplace", "sort_bin")):
                assert len({tuple(tags) for tags in theirs}) > 1, ordering  # the draws do change with the epoch
    assert compared == 240


def test_seeding_options_are_returnns(hdf, tmp_path):
    """random_seed_offset, fixed_random_seed (the same order every epoch) and seq_order_seq_lens_file."""
    lens_file = tmp_path / "lens.txt"
    tags = [f"a/{i}" for i in range(len(LENGTHS_A))] + [f"b/{i}" for i in range(len(LENGTHS_B))]
    lens_file.write_text(repr({tag: (7 * i) % 11 for i, tag in enumerate(tags)}))
    for ordering in ("random", "laplace:.4", "sort_bin_shuffle_x2:.4"):
        for extra in (
            {"random_seed_offset": 5},
            {"fixed_random_seed": 3, "partition_epoch": 3},
            {"seq_order_seq_lens_file": str(lens_file), "partition_epoch": 3},
        ):
            spec = {**hdf, "seq_ordering": ordering, **extra}
            assert our_tags(spec, range(1, 5)) == returnn_tags(spec, range(1, 5)), spec
    fixed = our_tags({**hdf, "seq_ordering": "random", "fixed_random_seed": 3}, (1, 2))
    assert fixed[0] == fixed[1]


def test_a_returnn_config_gets_returnns_default_order_and_orders_while_ours_keep_theirs(hdf):
    """Through the engine's dataset setup: a RETURNN config (backend set) without seq_ordering or batching keeps the
    dataset's order as RETURNN does, and its "laplace:.4" is RETURNN's; a config for this framework still shuffles
    (its old draw: default_rng([random_seed, full epoch]))."""

    def planned(options: dict, epoch: int) -> list[str]:
        _, loaders = init_data(
            Config.from_dict({"batch_size": 1000, **options}), ["train"], "train", torch.device("cpu")
        )
        dataset = loaders["train"].dataset
        return [dataset.seq_tag(int(i)) for i in dataset.get_seq_order(epoch)]

    everything = returnn_tags({**hdf, "seq_ordering": "default"}, (1,))[0]
    assert planned({"train": hdf, "backend": "torch"}, 2) == everything
    laplace = {"train": hdf, "backend": "torch", "batching": "laplace:.4"}
    assert planned(laplace, 2) == returnn_tags({**hdf, "seq_ordering": "laplace:.4"}, (2,))[0]
    ours = planned({"train": hdf, "random_seed": 7}, 2)
    assert ours == [everything[i] for i in np.random.default_rng([7, 2]).permutation(len(everything))]


def test_a_wrapping_datasets_offset_reaches_its_datasets_as_in_returnn(hdf):
    """MetaDataset's random_seed_offset is its datasets' default (RETURNN's parent_dataset), so the controlling
    dataset shuffles as RETURNN's."""
    inner = {**hdf, "seq_ordering": "laplace:.4", "partition_epoch": 3}
    spec = {
        "class": "MetaDataset",
        "datasets": {"hdf": inner},
        "data_map": {"data": ("hdf", "data"), "classes": ("hdf", "classes")},
        "seq_order_control_dataset": "hdf",
        "random_seed_offset": 4,
    }
    assert our_tags(spec, range(1, 5)) == returnn_tags(spec, range(1, 5))
    assert our_tags(spec, (1,)) != our_tags({**spec, "random_seed_offset": 0}, (1,))
