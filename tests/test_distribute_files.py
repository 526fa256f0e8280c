"""DistributeFilesDataset: files over sub-epochs and ranks, balanced by size, only a rank's own files opened,
the sub-epoch following from the epoch on resume; and two real torchrun ranks training on disjoint files."""

from __future__ import annotations

import ast
import os
import re

import h5py
import numpy as np
import pytest
import torch
from test_distributed import torchrun

from conftest import write_config
from framework.base.errors import ConfigError
from framework.datasets import DistributeFilesDataset, init_dataset
from framework.datasets.distribute_files import deal_by_size, split_by_size
from framework.datasets.extern_data import parse_extern_data
from framework.datasets.hdf import write_hdf
from framework.datasets.loader import BatchLoader, RankPlan

# Shard k holds SEQS[k] sequences whose frames carry about k in feature 0: a batch shows which files it came from.
SEQS = [3, 9, 4, 12, 2, 7, 5, 10, 6, 8, 3, 11]
DIM = 64


def write_shards(directory, seqs=SEQS) -> list[str]:
    """One RETURNN HDF file per shard: sequences of 20 to 29 frames of DIM features (enough that the data, more
    than HDF's own structure, makes the size of a file), class ids per frame."""
    paths = []
    for k, count in enumerate(seqs):
        rng = np.random.default_rng(k)
        lengths = rng.integers(20, 30, size=count)
        data = [rng.normal(size=(t, DIM)).astype(np.float32) for t in lengths]
        for seq in data:
            seq[:, 0] = k + rng.uniform(-0.1, 0.1, size=len(seq))
        classes = [seq[:, 1:4].argmax(axis=1) for seq in data]  # learnable from the input
        path = os.path.join(str(directory), f"shard{k:02d}.hdf")
        write_hdf(path, {"data": data, "classes": classes}, [f"s{k}/{i}" for i in range(count)], "data", {"classes": 3})
        paths.append(path)
    return paths


def hdf_of(files):
    return {"class": "HDFDataset", "files": files, "seq_ordering": "random"}


def sharded(files, rank, world_size=2, partition_epoch=3, get_sub_epoch_dataset=hdf_of, **kwargs):
    return DistributeFilesDataset(
        files,
        get_sub_epoch_dataset,
        partition_epoch=partition_epoch,
        distrib_shard_files=True,
        rank=rank,
        world_size=world_size,
        seq_ordering="random",
        random_seed=42,
        **kwargs,
    )


def shard_numbers(dataset, indices) -> list[int]:
    """The shards of the sequences ``indices`` of the dataset's current sub-epoch (their frames' value)."""
    return [round(float(dataset.get_seq(int(i))["data"][0, 0])) for i in indices]


def test_split_by_size_and_deal_by_size_fill_every_part_and_balance():
    assert [list(r) for r in split_by_size([1, 1, 78, 120], 4)] == [[0], [1], [2], [3]]
    parts = split_by_size([5, 5] + [10] * 7, 5)  # 16 per part on average: a naive greedy leaves the last empty
    assert all(parts) and [i for r in parts for i in r] == list(range(9))
    sums = [sum(SEQS[i] for i in r) for r in split_by_size(SEQS, 4)]
    assert sum(sums) == sum(SEQS) and max(sums) - min(sums) <= max(SEQS)
    assert [len(r) for r in split_by_size([100, 1, 1, 1, 1, 1], 2, min_count=3)] == [3, 3]
    with pytest.raises(ValueError):
        split_by_size([1, 2, 3], 2, min_count=2)
    assert deal_by_size([5, 5, 1, 1], 2) == [[0, 2], [1, 3]]  # 6 and 6, where a consecutive cut gives 5 and 7
    shares = deal_by_size([7, 1, 1, 1, 1, 1, 1, 1, 4, 3], 2)
    assert sorted(i for share in shares for i in share) == list(range(10)) and shares == [sorted(s) for s in shares]
    assert sorted(sum([7, 1, 1, 1, 1, 1, 1, 1, 4, 3][i] for i in share) for share in shares) == [10, 11]
    assert all(deal_by_size([0, 0, 0], 3))  # every share gets an entry, also of empty files


def test_every_file_once_per_full_epoch_balanced_by_size_and_reshuffled(tmp_path):
    files = write_shards(tmp_path)
    ranks = [sharded(files, rank) for rank in (0, 1)]
    sizes = [os.path.getsize(f) for f in files]
    per_full_epoch = []
    for full_epoch in (1, 2):
        parts = [[ranks[r].sub_epoch_part((full_epoch - 1) * 3 + i + 1) for i in range(3)] for r in (0, 1)]
        assert sorted(i for rank in parts for part in rank for i in part) == list(range(len(files)))  # once each
        for i in range(3):  # the ranks' parts of a sub-epoch: as close as the files allow (what steps equalize)
            rank_bytes = [sum(sizes[k] for k in parts[r][i]) for r in (0, 1)]
            assert abs(rank_bytes[0] - rank_bytes[1]) <= max(sizes[k] for r in (0, 1) for k in parts[r][i])
        sub_epoch_bytes = [sum(sizes[k] for r in (0, 1) for k in parts[r][i]) for i in range(3)]
        assert max(sub_epoch_bytes) - min(sub_epoch_bytes) <= max(sizes)
        per_full_epoch.append(parts)
    assert per_full_epoch[0] != per_full_epoch[1]  # shuffled anew every full epoch
    assert ranks[0].file_parts(1) == ranks[1].file_parts(1)  # every rank cuts the same way


def test_each_rank_opens_only_its_files_and_reads_each_sequence_once(tmp_path, monkeypatch):
    files = write_shards(tmp_path)
    opened: list[str] = []
    real_file = h5py.File

    def recording_file(name, *args, **kwargs):
        opened.append(os.fspath(name))
        return real_file(name, *args, **kwargs)

    monkeypatch.setattr(h5py, "File", recording_file)
    seen = {}
    for rank in (0, 1):
        dataset = sharded(files, rank)
        for epoch in (4, 5):  # a resumed run: no epoch before 4 asked for
            opened.clear()
            order = dataset.get_seq_order(epoch)
            shards = shard_numbers(dataset, order)
            expected = dataset.sub_epoch_part(epoch)
            assert sorted(set(opened)) == sorted(files[i] for i in expected)
            assert sorted(shards) == sorted(k for k in expected for _ in range(SEQS[k]))  # every sequence once
            seen[rank, epoch] = set(expected)
    assert not seen[0, 4] & seen[1, 4] and not seen[0, 5] & seen[1, 5]


def test_resumed_at_epoch_k_reads_what_an_uninterrupted_run_reads(tmp_path):
    files = write_shards(tmp_path)
    uninterrupted = sharded(files, 1)
    runs = {epoch: (uninterrupted.sub_epoch_part(epoch), uninterrupted.get_seq_order(epoch)) for epoch in range(1, 8)}
    batch = uninterrupted.get_batch(runs[7][1][:4])
    resumed = sharded(files, 1)
    order = resumed.get_seq_order(7)
    assert resumed.sub_epoch_part(7) == runs[7][0] and np.array_equal(order, runs[7][1])
    assert all(np.array_equal(resumed.get_batch(order[:4])[k], batch[k]) for k in batch)
    assert runs[4][0] != runs[7][0]  # full epochs 2 and 3 differ: the sub-epoch is not just the epoch modulo 3


def test_npy_shards_through_concat_dataset_and_a_rank_plan(tmp_path):
    shards = []
    for k, count in enumerate([4, 6, 5, 3]):
        np.save(tmp_path / f"x{k}.npy", np.full((count, 2), k, dtype=np.float32))
        np.save(tmp_path / f"y{k}.npy", np.full((count,), k % 3, dtype=np.int64))
        shards.append((str(tmp_path / f"x{k}.npy"), str(tmp_path / f"y{k}.npy")))

    def numpy_shards(entries):
        parts = [{"class": "NumpyDataset", "arrays": {"data": x, "classes": y}} for x, y in entries]
        return {"class": "ConcatDataset", "datasets": parts, "seq_ordering": "random"}

    dataset = sharded(shards, 0, partition_epoch=2, get_sub_epoch_dataset=numpy_shards)
    extern_data = parse_extern_data(
        {"data": {"shape": (2,), "dtype": "float32"}, "classes": {"shape": (), "dtype": "int64", "sparse_dim": 3}}
    )
    loader = BatchLoader(dataset, extern_data, option="train", batch_size=4, max_seqs=None, device=torch.device("cpu"))
    plan = loader.plan(2)
    assert isinstance(plan, RankPlan)  # torch.distributed takes it as this rank's, not every N-th batch of it
    got = sorted(round(float(v)) for b in plan for v in loader.numpy_batch(b)["data"][:, 0])
    ((k,),) = [dataset.sub_epoch_part(2)]  # 4 shards, 2 ranks x 2 sub-epochs: one shard each
    assert got == [k] * len(np.load(shards[k][0]))


def test_a_check_that_plans_another_epoch_meanwhile_does_not_change_what_training_reads(tmp_path):
    dataset = sharded(write_shards(tmp_path), 0)
    extern_data = parse_extern_data({"data": {"shape": (None, DIM), "dtype": "float32"}})
    training, check = (
        BatchLoader(dataset, extern_data, option="train", batch_size=200, max_seqs=None, device=torch.device("cpu"))
        for _ in "ab"
    )
    batches = training.iterate(training.plan(5))
    check.numpy_batch(check.plan(1)[0])  # e.g. a startup check looking at the first batches
    shards = {round(float(v)) for _, batch in batches for v in batch["data"][:, 0, 0]}
    assert shards == set(dataset.sub_epoch_part(5)) != set(dataset.sub_epoch_part(1))


def test_config_errors(tmp_path):
    files = write_shards(tmp_path, [2, 3, 2])
    with pytest.raises(ConfigError, match="cannot fill partition_epoch 2 x 2 ranks"):
        sharded(files, 0, partition_epoch=2)
    with pytest.raises(ConfigError, match="explicit 'seq_ordering'"):
        sharded(
            files, 0, partition_epoch=1, get_sub_epoch_dataset=lambda f: {"class": "HDFDataset", "files": f}
        ).key_info()
    with pytest.raises(ConfigError, match="orders its files"):
        DistributeFilesDataset(files, hdf_of, seq_ordering="sorted").get_seq_order(1)
    with pytest.raises(ConfigError, match="cannot read the size of"):
        DistributeFilesDataset(files + [str(tmp_path / "missing.hdf")], hdf_of)
    spec = {
        "class": "DistributeFilesDataset",
        "files": files,
        "get_sub_epoch_dataset": hdf_of,
        "distrib_shard_files": True,
    }
    with pytest.raises(ConfigError, match="only the train dataset"):
        init_dataset(spec, option="dev", random_seed=1)
    assert init_dataset(spec, option="train", random_seed=1).seq_ordering == "random"
    parts = [{"class": "NumpyDataset", "arrays": {"data": np.zeros((2, n))}} for n in (3, 4)]
    with pytest.raises(ConfigError, match="need the same keys, shapes and dtypes"):
        init_dataset({"class": "ConcatDataset", "datasets": parts}, option="train", random_seed=1)


TORCHRUN_CONFIG = """
import os
import torch
from torch import nn

SHARDS = {shards!r}
random_seed = 42

def get_sub_epoch_dataset(files):
    with open({record!r} + ".rank" + os.environ["RANK"], "a") as f:
        f.write(repr(files) + "\\n")
    return {{"class": "HDFDataset", "files": files, "seq_ordering": "random"}}

train = {{
    "class": "DistributeFilesDataset", "files": SHARDS, "get_sub_epoch_dataset": get_sub_epoch_dataset,
    "partition_epoch": 2, "distrib_shard_files": True,
}}
extern_data = {{
    "data": {{"shape": (None, {dim}), "dtype": "float32"}},
    "classes": {{"shape": (None,), "dtype": "int64", "sparse_dim": 3}},
}}
batch_size = 12
num_epochs = 2
optimizer = {{"class": "sgd"}}
learning_rate = 0.1
torch_distributed = {{}}

def get_model(**_kwargs):
    return nn.Linear({dim}, 3)

def train_step(*, model, extern_data, run_ctx, **_kwargs):
    frames = torch.arange(extern_data["data"].shape[1])[None, :] < extern_data["data:seq_len"][:, None]
    logits = model(extern_data["data"])[frames]
    run_ctx.mark_as_loss(name="ce", loss=nn.functional.cross_entropy(logits, extern_data["classes"][frames]))
"""


@pytest.mark.slow
def test_two_torchrun_ranks_train_on_disjoint_files_and_resume_at_the_right_sub_epoch(tmp_path):
    shards = write_shards(tmp_path, [3, 9, 4, 12, 2, 7, 5, 10])
    record = str(tmp_path / "opened")
    config = write_config(tmp_path, TORCHRUN_CONFIG.format(shards=shards, record=record, dim=DIM))
    model = ["++model", str(tmp_path / "m"), "++log", str(tmp_path / "log")]
    first = torchrun(config, *model)
    assert first.returncode == 0, first.stdout + first.stderr
    resumed = torchrun(config, *model, "++num_epochs", "3")
    assert resumed.returncode == 0 and "Resuming from" in resumed.stdout, resumed.stdout + resumed.stderr

    # Each rank was given its own files: what the same dataset with the rank given explicitly computes.
    given = {r: [ast.literal_eval(line) for line in open(f"{record}.rank{r}")] for r in (0, 1)}
    expected = {r: sharded(shards, r, partition_epoch=2) for r in (0, 1)}
    for r in (0, 1):
        # The first run: epochs 1 and 2. The resumed one: epoch 1's files before any epoch (for the keys), then 3.
        wanted = [[shards[i] for i in expected[r].sub_epoch_part(epoch)] for epoch in (1, 2, 1, 3)]
        assert given[r] == wanted
    for epoch in (0, 1, 3):
        assert not set(given[0][epoch]) & set(given[1][epoch])
    assert sorted(given[0][0] + given[1][0] + given[0][1] + given[1][1]) == sorted(shards)

    # Both ranks took the same number of steps each epoch (the longer one left out its last batches); no findings.
    for epoch in (1, 2, 3):
        steps = [_train_steps(tmp_path / name, epoch) for name in ("log", "log.rank1")]
        assert steps[0] == steps[1] and steps[0] > 0
    assert "WARNING" not in open(tmp_path / "log").read() + open(tmp_path / "log.rank1").read()


def _train_steps(log_path, epoch) -> int:
    """The number of training steps of ``epoch`` in a rank's log."""
    text = open(log_path).read()
    # train.log lines start with their time
    found = re.search(rf"^\d{{4}}-\d\d-\d\d \d\d:\d\d:\d\d Epoch {epoch} train: .*?(\d+) steps,", text, re.MULTILINE)
    assert found, text
    return int(found.group(1))
