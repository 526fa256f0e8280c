"""RETURNN's DataLoader workers (``torch_dataloader_opts`` num_workers > 1, ``torch_dataloader_shard_workers``),
compared with RETURNN's own code: its sharding of a (sub-)epoch's sequences over the workers, and the batches its
torch engine gives with two worker processes, batch by batch (the same sequence tags in the same batches)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from framework.base.config import Config
from framework.base.errors import ConfigError
from framework.core.build import init_data
from framework.datasets import init_dataset

pytest.importorskip("returnn")

from test_returnn_datasets_more import write_returnn_hdf  # noqa: E402

LENGTHS = [4, 2, 6, 3, 5, 1, 7, 2, 3, 4, 5]


@pytest.fixture
def hdf(tmp_path) -> dict:
    path = write_returnn_hdf(tmp_path / "a.hdf", [f"a/{i}" for i in range(len(LENGTHS))], LENGTHS, seed=1)
    return {"class": "HDFDataset", "files": [path]}


def test_a_workers_shard_is_returnns_over_orderings_partitions_and_worker_counts(hdf):
    """RETURNN's HDFDataset with set_sharding (as each DataLoader worker sets it) gives the same sequences, in the same
    order, as get_seq_order's shard here; for the random orderings (whose draws differ here) RETURNN's
    _apply_partition_epoch_and_sharding cuts our full epoch's order as get_seq_order's shard does. 60 cases."""
    from returnn.datasets.basic import Dataset as ReturnnDataset
    from returnn.datasets.basic import init_dataset as returnn_init_dataset

    cases = 0
    for ordering in ("default", "sorted", "sorted_reverse", "random", "laplace:3"):
        for partition in (1, 2, 3):
            for count in (2, 3):
                spec = {**hdf, "seq_ordering": ordering, "partition_epoch": partition, "fixed_random_seed": 5}
                ours = init_dataset(spec, option="train", random_seed=1)
                for epoch in (1, partition + 1):
                    full = ours._full_epoch_order((epoch - 1) // partition + 1)
                    for index in range(count):
                        mine = [ours.seq_tag(int(i)) for i in ours.get_seq_order(epoch, (index, count))]
                        if ordering.startswith(("random", "laplace")):
                            cut = ReturnnDataset._apply_partition_epoch_and_sharding(
                                list(full), partition, epoch, count, index
                            )
                            assert mine == [ours.seq_tag(int(i)) for i in cut], (spec, epoch, index, count)
                            continue
                        theirs = returnn_init_dataset(dict(spec))
                        theirs.set_sharding(num_shards=count, shard_index=index)
                        theirs.init_seq_order(epoch=epoch)
                        assert mine == [theirs.get_tag(i) for i in range(theirs.num_seqs)], (spec, epoch, index)
                cases += 2
    assert cases == 60


def _returnn_batches(options: dict, epochs) -> list[list[list[str]]]:
    """The train batches (their sequence tags) of RETURNN's torch engine with ``options``, per epoch: its
    ``__main__.load_data`` and ``Engine._create_data_loader``, with its DataLoader worker processes."""
    import returnn.__main__ as returnn_main
    from returnn.config import Config as ReturnnConfig
    from returnn.config import global_config_ctx
    from returnn.torch.engine import Engine
    from returnn.util.basic import BehaviorVersion

    # RETURNN's loader workers, forked from this process: its default start method spawns each worker (a fresh
    # interpreter importing torch and RETURNN, ~5-10 s of CPU each, 8 of them here); the option is RETURNN's own, and
    # the workers get the same sharding and epoch in either (the batches were compared under both: equal).
    loader_opts = {**options["torch_dataloader_opts"], "multiprocessing_context": "fork"}
    config = ReturnnConfig(
        {"backend": "torch", "device": "cpu", "task": "train", **options, "torch_dataloader_opts": loader_opts}
    )
    BehaviorVersion._behavior_version = None  # RETURNN sets it once per process
    BehaviorVersion.set(config.int("behavior_version", 0) or None)
    got = []
    with global_config_ctx(config):
        returnn_main.config = config
        train, _ = returnn_main.load_data(config, 0, "train")
        engine = Engine(config)
        for epoch in epochs:
            engine._epoch_mp_shared.value = epoch
            got.append(
                [[str(tag) for tag in batch["seq_tag"]] for batch in engine._create_data_loader(train, train=True)]
            )
    BehaviorVersion._behavior_version = None
    return got


def _our_batches(options: dict, epochs) -> list[list[list[str]]]:
    _, loaders = init_data(Config.from_dict(options), ["train"], "train", torch.device("cpu"))
    loader = loaders["train"]
    return [[[loader.dataset.seq_tag(int(i)) for i in batch] for batch in loader.plan(epoch)] for epoch in epochs]


@pytest.mark.slow
def test_two_dataloader_workers_give_returnns_batches_sharded_or_each_batch_twice(hdf):
    """RETURNN's engine with 2 worker processes: sharded (behavior_version 37, or the option with partition_epoch 2,
    each worker batching its piece, the workers' batches in turn), or not (every batch twice)."""
    common = {"batch_size": 10, "max_seqs": 3, "batching": "default", "torch_dataloader_opts": {"num_workers": 2}}
    cases = [
        ({**common, "train": hdf, "behavior_version": 37}, (1,)),
        ({**common, "train": {**hdf, "partition_epoch": 2}, "torch_dataloader_shard_workers": True}, (1, 2)),
        ({**common, "train": hdf, "behavior_version": 21}, (1,)),
    ]
    got = []
    for options, epochs in cases:
        got.append(_returnn_batches(options, epochs))
        assert _our_batches(options, epochs) == got[-1], options
    assert got[0][0][:3] == [["a/0", "a/1"], ["a/6"], ["a/2"]]  # worker 0's first batch, worker 1's, worker 0's
    assert got[2][0][0] == got[2][0][1]  # behavior_version 21: each worker batches all sequences


def test_sharding_is_refused_for_a_dataset_returnn_cannot_shard_with_both_ways_forward(hdf):
    static = {"class": "StaticDataset", "data": [{"data": np.ones((3, 2), "float32")}] * 4}
    options = {"train": static, "torch_dataloader_opts": {"num_workers": 2}, "batching": "default"}
    options["torch_dataloader_shard_workers"] = True
    with pytest.raises(ConfigError, match="torch_dataloader_shard_workers = False"):
        _our_batches(options, (1,))
    plan = _our_batches({**options, "torch_dataloader_shard_workers": False}, (1,))[0]
    assert plan[0] == plan[1] and len(plan) % 2 == 0  # every worker batches all of them, as RETURNN's do
    assert plan == _our_batches({**options, "torch_dataloader_shard_workers": None, "backend": "torch"}, (1,))[0]
    native = _our_batches({**options, "torch_dataloader_shard_workers": None}, (1,))[0]
    assert len(native) * 2 == len(plan)  # a config for this framework: one plan, the workers only read it
