"""RETURNN's sequence orderings (``Dataset.get_seq_order_for_epoch``) against RETURNN's own HDFDataset on HDF files
written by RETURNN's SimpleHDFWriter: for every ordering family, several epochs, partition_epoch 1 and 3, the same
sequence tags in the same order, with RETURNN's seeding (the epoch and ``random_seed_offset``, ``fixed_random_seed``)
as a RETURNN config gets it (``random_seed=None``). A config for this framework keeps its own draws. Also the orders
RETURNN gives a config's dev and eval datasets (its ``__main__.load_data``) and its forward data (its torch engine's
``forward_with_callback``), a ``seq_ordering`` function, and each rank's train order and the dev/eval order under
``torch_distributed`` (also under real torchrun)."""

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


def _returnn_main_dataset(options: dict, name: str):
    """The ``name`` dataset (dev, eval, train) as RETURNN's ``__main__.init_data`` builds it for a config with
    ``options``, under that config."""
    import returnn.__main__ as returnn_main
    from returnn.config import Config as ReturnnConfig
    from returnn.datasets.basic import Dataset as ReturnnDataset

    config = ReturnnConfig({"backend": "torch", **options})
    returnn_main.config = config
    kwargs = ReturnnDataset.get_default_kwargs_train if name == "train" else ReturnnDataset.get_default_kwargs_eval
    dataset, _ = returnn_main.load_data(config, 0, name, **kwargs(config=config))
    return config, dataset


def _epoch_tags(dataset, epoch: int) -> list[str]:
    dataset.init_seq_order(epoch=epoch)
    tags, i = [], 0
    while dataset.is_less_than_num_seqs(i):
        dataset.load_seqs(i, i + 1)
        tags.append(dataset.get_tag(i))
        i += 1
    return tags


def test_dev_and_eval_datasets_of_a_returnn_config_are_ordered_as_returnns_load_data_orders_them(hdf):
    """RETURNN's __main__.load_data gives dev and eval seq_ordering "sorted" (get_default_kwargs_eval) unless the
    dict sets one; the config's batching then does not apply, but does to a dict that sets seq_ordering None. Its
    engine builds eval_datasets without that default (the dataset's order). Compared through the engine's dataset
    setup here against RETURNN's own load_data on the same files, epochs 1 and 2."""
    from returnn.config import global_config_ctx
    from returnn.datasets.basic import init_dataset as returnn_init_dataset

    meta = {
        "class": "MetaDataset",
        "datasets": {"h": hdf},
        "data_map": {"data": ("h", "data"), "classes": ("h", "classes")},
        "seq_order_control_dataset": "h",
    }
    combined = {
        "class": "CombinedDataset",
        "datasets": {"x": {**hdf, "files": hdf["files"][:1]}, "y": {**hdf, "files": hdf["files"][1:]}},
        "data_map": {("x", "data"): "data", ("y", "data"): "data"},
    }
    cases = [
        ("dev", {"dev": hdf}),
        ("dev", {"dev": hdf, "batching": "random"}),  # batching is the train dataset's only
        ("eval", {"eval": {**hdf, "seq_ordering": None}, "batching": "laplace:.4"}),
        ("dev", {"dev": {**hdf, "seq_ordering": "random", "partition_epoch": 2}}),
        ("dev", {"dev": meta}),  # RETURNN's MetaDataset leaves its controlling dataset's order
        ("dev", {"dev": combined}),
    ]
    sorted_seen = False
    for name, options in cases:
        config, dataset = _returnn_main_dataset(options, name)
        with global_config_ctx(config):
            theirs = [_epoch_tags(dataset, epoch) for epoch in (1, 2)]
        _, loaders = init_data(
            Config.from_dict({"backend": "torch", "batch_size": 1000, **options}), [name], None, torch.device("cpu")
        )
        ours = loaders[name].dataset
        assert [[ours.seq_tag(int(i)) for i in ours.get_seq_order(epoch)] for epoch in (1, 2)] == theirs, options
        sorted_seen |= theirs[0] == returnn_tags({**hdf, "seq_ordering": "sorted"}, (1,))[0]
    assert sorted_seen
    # eval_datasets: RETURNN's engine builds them with init_dataset(opts, default_kwargs={"name": name})
    spec = {**hdf}
    theirs = _epoch_tags(returnn_init_dataset(dict(spec), default_kwargs={"name": "other"}), 1)
    _, loaders = init_data(
        Config.from_dict({"backend": "torch", "batch_size": 1000, "eval_datasets": {"other": spec}}),
        [],
        None,
        torch.device("cpu"),
    )
    ours = loaders["other"].dataset
    assert [ours.seq_tag(int(i)) for i in ours.get_seq_order(1)] == theirs == returnn_tags(spec, (1,))[0]
    # a config for this framework keeps the dataset's order for dev
    _, loaders = init_data(Config.from_dict({"batch_size": 1000, "dev": hdf}), ["dev"], None, torch.device("cpu"))
    assert [loaders["dev"].dataset.seq_tag(int(i)) for i in loaders["dev"].dataset.get_seq_order(1)] == theirs


FORWARD_CONFIG = """
import torch
from returnn.forward_iface import ForwardCallbackIface

backend = "torch"
task = "forward"
device = "cpu"
batch_size = 12
torch_dataloader_opts = {"num_workers": 0}  # RETURNN's batches without a worker process to start
extern_data = {"data": {"dim": 3}, "classes": {"dim": 5, "sparse": True}}


def get_model(**_kwargs):
    return torch.nn.Linear(3, 5)


def forward_step(**_kwargs):
    pass  # nothing marked: the callback gets each sequence's tag, in the order of the run


class Tags(ForwardCallbackIface):
    def init(self, *, model):
        self.tags = []

    def process_seq(self, *, seq_tag, outputs):
        self.tags.append(seq_tag)

    def finish(self):
        with open(TAGS_FILE, "a") as f:
            f.write(" ".join(self.tags) + "\\n")


forward_callback = Tags
"""


def test_a_returnn_configs_forward_runs_its_data_in_returnns_order(hdf, tmp_path):
    """RETURNN's Engine.forward_with_callback orders the forward data longest first ("sorted_reverse") where the
    dataset's class sorts, whatever its dict set, unless sort_dataset = False, and for the loaded checkpoint's epoch.
    RETURNN's engine runs each case on the same files and checkpoint (epoch 3) as a forward run here."""
    from returnn.config import Config as ReturnnConfig
    from returnn.config import global_config_ctx
    from returnn.datasets.basic import init_dataset as returnn_init_dataset
    from returnn.torch.engine import Engine as ReturnnEngine

    from framework.assembly import Engine
    from framework.base.config import load_config

    checkpoint = tmp_path / "model.pt"
    torch.save({"model": torch.nn.Linear(3, 5).state_dict(), "epoch": 3, "step": 10}, checkpoint)
    cases = [
        {"forward_data": {**hdf, "seq_ordering": "random"}},
        {"forward_data": "dev", "dev": hdf},
        {"forward_data": {**hdf, "seq_ordering": "random"}, "sort_dataset": False},  # the checkpoint's epoch
    ]
    for i, options in enumerate(cases):
        path = tmp_path / f"c{i}.py"
        tags_file = tmp_path / f"tags{i}.txt"
        common = {"load": str(checkpoint), "TAGS_FILE": str(tags_file)}
        path.write_text(FORWARD_CONFIG + "".join(f"\n{k} = {v!r}" for k, v in {**options, **common}.items()))
        config = ReturnnConfig()
        config.load_file(str(path))
        if options["forward_data"] == "dev":
            config, data = _returnn_main_dataset(config.typed_dict, "dev")
        else:
            data = returnn_init_dataset(config.typed_value("forward_data"))
        with global_config_ctx(config):
            engine = ReturnnEngine(config)
            engine.init_network_from_config(config)
            engine.forward_with_callback(dataset=data, callback=config.typed_value("forward_callback")())
        Engine(load_config([str(path)], {"model": None})).run("forward")
        theirs, ours = tags_file.read_text().splitlines()
        assert ours == theirs, options
        if "sort_dataset" not in options:
            assert theirs.split() == returnn_tags({**hdf, "seq_ordering": "sorted_reverse"}, (1,))[0]
        else:
            assert theirs.split() == returnn_tags(options["forward_data"], (3,))[0]


def _by_epoch(*, epoch, **_kwargs):
    return "laplace:.4" if epoch % 3 else "sorted_reverse"


def test_a_seq_ordering_function_is_called_as_returnn_calls_it(hdf, tmp_path):
    """A function as a dataset's seq_ordering gets each (sub-)epoch (epoch=, and a keyword RETURNN adds, so a
    function without **kwargs stops) and returns the ordering: the same tags in the same order as RETURNN's
    HDFDataset, partition_epoch 1 and 2, six (sub-)epochs; a function that returns no ordering stops the run."""
    from framework.base.errors import ConfigError

    for partition in (1, 2):
        spec = {**hdf, "seq_ordering": _by_epoch, "partition_epoch": partition}
        assert our_tags(spec, range(1, 7)) == returnn_tags(spec, range(1, 7)), partition
    with pytest.raises(ConfigError, match=r"\*\*kwargs"):
        our_tags({**hdf, "seq_ordering": lambda epoch: "random"}, (1,))
    with pytest.raises(ConfigError, match="returned 'shuffled' for epoch 1"):
        our_tags({**hdf, "seq_ordering": lambda **_: "shuffled"}, (1,))


@pytest.mark.parametrize("distribution", ["random_seed_offset", "shard"])
def test_each_rank_gets_returnns_train_order_under_torch_distributed(hdf, monkeypatch, distribution):
    """torch_distributed's dataset_distribution as RETURNN's: "random_seed_offset" (a RETURNN config's default) gives
    rank r the train order of random_seed_offset r x 16127 (all sequences), "shard" the rank's shard of one order
    (RETURNN's _num_shards/_shard_index, as get_default_kwargs_train gives them), each rank planning its own batches
    (a RankPlan, cut to the fewest steps by Distributed.train_plan). Compared with RETURNN's HDFDataset, 2 ranks x 3
    sub-epochs of "laplace:.4" with partition_epoch 3 (the rank is what the process group would say)."""
    from framework.datasets.loader import RankPlan

    spec = {**hdf, "seq_ordering": "laplace:.4", "partition_epoch": 3}
    options = {"torch_distributed": {} if distribution != "shard" else {"dataset_distribution": "shard"}}
    orders = []
    for rank in range(2):
        monkeypatch.setattr(torch.distributed, "is_initialized", lambda: True)
        monkeypatch.setattr(torch.distributed, "get_rank", lambda rank=rank: rank)
        monkeypatch.setattr(torch.distributed, "get_world_size", lambda: 2)
        config = Config.from_dict({"backend": "torch", "batch_size": 1000, "train": spec, **options})
        _, loaders = init_data(config, ["train"], "train", torch.device("cpu"))
        loader = loaders["train"]
        ours = []
        for epoch in range(1, 4):
            plan = loader.plan(epoch)
            assert isinstance(plan, RankPlan) and plan.share_rest == (distribution == "shard")
            ours.append([loader.dataset.seq_tag(int(i)) for batch in plan for i in batch])
        if distribution == "shard":
            theirs = returnn_tags({**spec, "_num_shards": 2, "_shard_index": rank}, range(1, 4))
        else:
            theirs = returnn_tags({**spec, "random_seed_offset": rank * 16127}, range(1, 4))
        assert ours == theirs, rank
        orders.append(ours)
    if distribution == "shard":  # the two shards of each sub-epoch together are RETURNN's sub-epoch
        whole = returnn_tags(spec, range(1, 4))
        assert [orders[0][k] + orders[1][k] for k in range(3)] == whole
    else:
        assert orders[0] != orders[1]


def test_dev_and_eval_under_torch_distributed_are_in_the_order_returnns_rank_0_evaluates(hdf, monkeypatch):
    """RETURNN's torch engine evaluates dev and eval on rank 0 alone (Engine.eval_model: the other ranks wait), so
    its evaluation order is rank 0's: random_seed_offset = dataset_random_seed_offset + 0 x 16127
    (Dataset._get_default_random_seed_offset). Here every rank plans that order (and the ranks split its batches),
    while the train data get rank x 16127; compared with RETURNN's HDFDataset under RETURNN's global config, with
    RETURNN's distributed context faked to rank 0 and to rank 1."""
    import returnn.torch.distributed as returnn_distributed
    from returnn.config import Config as ReturnnConfig
    from returnn.config import global_config_ctx
    from returnn.datasets.basic import init_dataset as returnn_init_dataset

    import framework.base.config as config_module

    spec = {**hdf, "seq_ordering": "random"}
    options = {"backend": "torch", "torch_distributed": {}, "dataset_random_seed_offset": 5}

    def returnns(rank: int) -> list[list[str]]:  # RETURNN's order on this rank, its offset its own code's
        fake = type("Ctx", (), {"rank": lambda self: rank, "size": lambda self: 2})()
        monkeypatch.setattr(returnn_distributed, "get_ctx", lambda config=None: fake)
        with global_config_ctx(ReturnnConfig(dict(options))):
            dataset = returnn_init_dataset(dict(spec))
            assert dataset.random_seed_offset == 5 + rank * 16127
            orders = []
            for epoch in (1, 2):
                dataset.init_seq_order(epoch=epoch)
                orders.append([dataset.get_tag(i) for i in range(dataset.num_seqs)])
        return orders

    rank_0, rank_1 = returnns(0), returnns(1)
    assert rank_0 != rank_1
    for rank in range(2):
        monkeypatch.setattr(torch.distributed, "is_initialized", lambda: True)
        monkeypatch.setattr(torch.distributed, "get_rank", lambda rank=rank: rank)
        monkeypatch.setattr(torch.distributed, "get_world_size", lambda: 2)
        config = Config.from_dict({**options, "batch_size": 1000, "train": spec, "dev": spec, "eval": spec})
        monkeypatch.setattr(
            config_module, "_loaded", config
        )  # the run's config, which dataset_random_seed_offset is read from
        _, loaders = init_data(config, ["train", "dev", "eval"], "train", torch.device("cpu"))
        for name in ("dev", "eval"):
            loader = loaders[name]
            ours = [[loader.dataset.seq_tag(int(i)) for batch in loader.plan(e) for i in batch] for e in (1, 2)]
            assert ours == rank_0, (rank, name)
        train = loaders["train"]
        ours = [[train.dataset.seq_tag(int(i)) for batch in train.plan(e) for i in batch] for e in (1, 2)]
        assert ours == (rank_0, rank_1)[rank], rank


# A RETURNN config whose step appends, per rank, the stage and the ids of its batch's sequences (their features).
DISTRIBUTED_ORDER = """
import os

import torch

backend = "torch"
device = "cpu"
torch_distributed = {}
train = {"class": "HDFDataset", "files": [FILE], "seq_ordering": "random"}
dev = {"class": "HDFDataset", "files": [FILE], "seq_ordering": "random"}
batch_size = 1000
max_seqs = 2
extern_data = {"data": {"dim": 3}}
num_epochs = 1
optimizer = {"class": "sgd"}
learning_rate = 0.1


def get_model(**_kwargs):
    return torch.nn.Linear(3, 2)


def train_step(*, model, extern_data, **_kwargs):
    from framework import get_run_ctx

    x = extern_data["data"]
    with open(f"ids.rank{os.environ['RANK']}", "a") as f:  # a file: the framework's checks hold back a step's output
        f.write(f"{get_run_ctx().stage} {x[:, 0, 0].round().long().tolist()}\\n")
    get_run_ctx().mark_as_loss(name="ce", loss=model(x).pow(2).mean())
"""


@pytest.mark.slow  # a torchrun job of 2 ranks, ~20 s
def test_under_torchrun_each_rank_trains_returnns_order_of_its_offset_and_dev_is_rank_0s(tmp_path):
    """A RETURNN config under real torchrun with torch_distributed = {} (RETURNN's "random_seed_offset"): rank r
    trains all 9 sequences in RETURNN's HDFDataset order of random_seed_offset r x 16127, and the dev batches of both
    ranks together are RETURNN's rank-0 order (offset 0), in batches of 2."""
    import ast

    from returnn.datasets.hdf import SimpleHDFWriter

    from conftest import run_torchrun

    path = tmp_path / "ids.hdf"
    writer = SimpleHDFWriter(str(path), dim=3, ndim=2)
    for i in range(1, 10):  # each sequence's features are its number, so a step's batch names its sequences
        writer.insert_batch(np.full((1, 1 + i % 4, 3), i, np.float32), seq_len=[1 + i % 4], seq_tag=[f"s{i}"])
    writer.close()
    config = tmp_path / "ordered.config"
    config.write_text(DISTRIBUTED_ORDER.replace("FILE", repr(str(path))))
    result = run_torchrun(str(config), "++model", "None", cwd=str(tmp_path), timeout=120)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    spec = {"class": "HDFDataset", "files": [str(path)], "seq_ordering": "random"}
    number = {f"s{i}": i for i in range(1, 10)}
    theirs = [[number[tag] for tag in returnn_tags({**spec, "random_seed_offset": r * 16127}, (1,))[0]] for r in (0, 1)]
    assert theirs[0] != theirs[1]
    dev_batches = set()
    for rank in (0, 1):
        steps = [line.split(" ", 1) for line in (tmp_path / f"ids.rank{rank}").read_text().splitlines()]
        # the framework's checks also run steps on a batch of one sequence twice: the distinct batches are the steps
        train = [tuple(ids) for stage, ids in ((s, ast.literal_eval(i)) for s, i in steps) if stage == "train"]
        train = list(dict.fromkeys(ids for ids in train if len(set(ids)) == len(ids)))
        assert [i for ids in train for i in ids] == theirs[rank], (rank, steps)
        # the checks also evaluate the first train batch; the dev evaluation comes after the last train step
        last_train = max(k for k, (stage, _) in enumerate(steps) if stage == "train")
        dev_batches |= {tuple(ast.literal_eval(ids)) for _, ids in steps[last_train + 1 :]}
    assert dev_batches == {tuple(theirs[0][k : k + 2]) for k in range(0, 9, 2)}
