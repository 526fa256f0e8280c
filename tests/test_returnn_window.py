"""RETURNN's ``window`` (each frame stacked with its neighbours), compared with RETURNN's own datasets and its
``__main__.load_data`` on the same files: the same tags, order, shapes, dtypes and values (max abs difference 0),
and the same refusals where RETURNN stops."""

from __future__ import annotations

import threading

import numpy as np
import pytest
import torch

from framework.base.config import Config
from framework.base.errors import ConfigError
from framework.core.build import init_data
from framework.datasets import init_dataset

pytest.importorskip("returnn")

from test_returnn_datasets_more import assert_same, returnn_epoch, write_returnn_hdf  # noqa: E402


@pytest.fixture
def hdfs(tmp_path) -> tuple[str, str]:
    first = write_returnn_hdf(tmp_path / "a.hdf", [f"a/{i}" for i in range(5)], [4, 1, 6, 3, 5], seed=1)
    second = write_returnn_hdf(tmp_path / "b.hdf", [f"b/{i}" for i in range(3)], [3, 7, 2], seed=2)
    return first, second


def _ours(spec: dict, epoch: int = 1, **kwargs) -> list[tuple[str, dict[str, np.ndarray]]]:
    dataset = init_dataset(dict(spec), option="dev", random_seed=1, **kwargs)
    order = dataset.get_seq_order(epoch)
    dataset.use_epoch(epoch)
    return [(dataset.seq_tag(int(i)), dataset.get_seq(int(i))) for i in order]


def test_window_stacks_the_frames_of_returnns_stacking_datasets_as_returnn(hdfs):
    hdf = {"class": "HDFDataset", "files": list(hdfs)}
    cases = [
        ({**hdf, "window": 3}, 9),
        ({**hdf, "window": 4}, 15),  # even: one more, as in RETURNN
        ({**hdf, "window": 1}, 3),
        ({"class": "DummyDataset", "input_dim": 2, "output_dim": 3, "num_seqs": 4, "seq_len": 5, "window": 5}, 10),
        (
            {
                "class": "DummyDatasetMultipleSequenceLength",
                "input_dim": 3,
                "output_dim": 4,
                "num_seqs": 3,
                "seq_len": {"data": 6, "classes": 2},
                "window": 3,
            },
            9,
        ),
        ({"class": "TaskEpisodicCopyDataset", "num_seqs": 4, "fixed_random_seed": 2, "window": 3}, 30),
    ]
    compared = 0
    for spec, features in cases:
        ours = _ours(spec)
        assert assert_same(ours, returnn_epoch(spec)) == 0.0
        assert all(seq["data"].shape[1] == features for _, seq in ours), spec
        compared += len(ours)
    # inside a MetaDataset (its sub-dataset's window; RETURNN's MetaDataset passes the stacked data on)
    meta = {
        "class": "MetaDataset",
        "datasets": {"a": {**hdf, "window": 3}},
        "data_map": {"data": ("a", "data"), "classes": ("a", "classes")},
        "seq_order_control_dataset": "a",
    }
    assert assert_same(_ours(meta), returnn_epoch(meta)) == 0.0
    # RETURNN's ConcatDataset and StaticDataset accept window and read their data whole (the sub-datasets' applies)
    concat = {"class": "ConcatDataset", "datasets": [{**hdf, "window": 3}, {**hdf, "window": 3}], "window": 5}
    static = {"class": "StaticDataset", "data": [{"data": np.ones((3, 2), "float32")}], "window": 3}
    for spec in (concat, static):
        assert assert_same(_ours(spec), returnn_epoch(spec)) == 0.0
    assert compared > 20


def test_task12ax_window_stacks_its_one_hot_data_with_returnns_sliding_window():
    """RETURNN's Task12AXDataset gives its inputs one-hot [T, 9] and stacks those (its draws differ from the ones
    here): ours with window 3 equals RETURNN's Dataset._sliding_window of our one-hot inputs."""
    from returnn.datasets.basic import init_dataset as returnn_init_dataset

    theirs = returnn_init_dataset({"class": "Task12AXDataset", "num_seqs": 2, "window": 3})
    theirs.init_seq_order(epoch=1)
    theirs.load_seqs(0, 1)
    assert theirs.get_data(0, "data").shape[1] == 27  # RETURNN: 3 x 9 floats
    plain = init_dataset({"class": "Task12AXDataset", "num_seqs": 4}, option="dev", random_seed=1)
    stacked = init_dataset({"class": "Task12AXDataset", "num_seqs": 4, "window": 3}, option="dev", random_seed=1)
    assert stacked.key_info()["data"] == {"shape": (None, 27), "dtype": "float32", "sparse_dim": None}
    for i in range(4):
        one_hot = np.eye(9, dtype=np.float32)[plain.get_seq(i)["data"]]
        mine = stacked.get_seq(i)["data"]
        assert mine.dtype == np.float32 and np.array_equal(mine, theirs._sliding_window(one_hot))
    batch = stacked.get_batch(np.array([0, 1]))
    assert batch["data"].shape[2] == 27


def _returnn_loaded(options: dict) -> dict[str, list[tuple[str, dict[str, np.ndarray]]]]:
    """RETURNN's train/dev/eval datasets as its ``__main__.init_data`` builds them from a config with ``options``
    (``kwargs_update_from_config`` gives them the config's window), and its engine's ``eval_datasets``."""
    import returnn.__main__ as returnn_main
    from returnn.config import Config as ReturnnConfig
    from returnn.config import global_config_ctx
    from returnn.datasets.basic import Dataset as ReturnnDataset
    from returnn.datasets.basic import init_dataset as returnn_init_dataset

    config = ReturnnConfig({"backend": "torch", "task": "train", **options})
    got = {}
    with global_config_ctx(config):
        returnn_main.config = config
        cache_sizes = returnn_main.get_cache_byte_sizes()  # RETURNN's HDF cache: by default 70% of the memory
        for number, name in enumerate(("train", "dev")):
            kwargs = ReturnnDataset.get_default_kwargs_eval(config=config) if name == "dev" else {}
            dataset, _ = returnn_main.load_data(config, cache_sizes[number], name, **kwargs)
            got[name] = None if dataset is None else _read(dataset)
        for name, spec in options.get("eval_datasets", {}).items():
            got[name] = _read(returnn_init_dataset(spec, default_kwargs={"name": name}))
    return got


def _read(dataset) -> list[tuple[str, dict[str, np.ndarray]]]:
    dataset.init_seq_order(epoch=1)
    seqs, i = [], 0
    while dataset.is_less_than_num_seqs(i):
        dataset.load_seqs(i, i + 1)
        for thread in threading.enumerate():  # RETURNN's HDF cache: its preload thread's work done (or failed)
            if thread.name.endswith("(_preload_seqs)"):
                thread.join()
        seqs.append((dataset.get_tag(i), {k: dataset.get_data(i, k) for k in dataset.get_data_keys()}))
        i += 1
    return sorted(seqs, key=lambda item: item[0])


def test_the_configs_window_goes_to_train_dev_and_eval_dicts_as_returnns_load_data_gives_it(hdfs):
    hdf = {"class": "HDFDataset", "files": [hdfs[0]]}
    extern_data = {"data": {"dim": 9}, "classes": {"dim": 5, "sparse": True}}
    stacked = {
        "window": 3,
        "train": {**hdf, "window": None},  # None takes the config's, as in RETURNN
        "dev": {**hdf, "files": [hdfs[1]]},
    }
    whole = {
        "window": 3,
        "train": {**hdf, "window": 1},  # its own wins
        "eval_datasets": {"extra": hdf},  # RETURNN's engine builds these without the config's window
    }
    for options, features in ((stacked, 9), (whole, 3)):
        theirs = _returnn_loaded(options)
        extern = {**extern_data, "data": {"dim": features}}
        config = Config.from_dict({**options, "extern_data": extern})
        _, loaders = init_data(config, ["train", "dev"], "train", torch.device("cpu"))
        assert set(loaders) == {name for name in theirs if theirs[name] is not None}
        for name, loader in loaders.items():
            dataset = loader.dataset
            ours = [(dataset.seq_tag(i), dataset.get_seq(i)) for i in range(dataset.num_seqs)]
            assert assert_same(sorted(ours, key=lambda s: s[0]), theirs[name]) == 0.0, name
            assert dataset.key_info()["data"]["shape"][1] == features
    assert Config.from_dict({**stacked, "window": 0}).get("window") == 0  # RETURNN's off value


def test_window_is_refused_where_returnn_stops_on_it(hdfs):
    from returnn.datasets.basic import init_dataset as returnn_init_dataset

    hdf = {"class": "HDFDataset", "files": [hdfs[0]]}
    meta = {"class": "MetaDataset", "datasets": {"a": hdf}, "data_map": {"data": ("a", "data")}}
    copy = {"class": "CopyTaskDataset", "nsymbols": 4, "num_seqs": 2, "minlen": 2, "maxlen": 5}
    for spec, theirs_fails in ((meta, AssertionError), (copy, ValueError)):
        with pytest.raises(theirs_fails):
            returnn_epoch({**spec, "window": 3})
        with pytest.raises(ConfigError, match="window"):
            _ours({**spec, "window": 3})
        assert len(_ours(spec, window=1)) > 0
    with pytest.raises(ConfigError, match="window = 3.*RETURNN stacks frames for it only in HDFDataset"):
        _ours(meta, window=3)  # the config's window given to a MetaDataset dict: RETURNN's assert window == 1
    with pytest.raises(ConfigError, match="window = -1"):
        _ours({**hdf, "window": -1})
    with pytest.raises(AssertionError):
        returnn_init_dataset({**hdf, "window": 0}).initialize()


@pytest.mark.filterwarnings("ignore::pytest.PytestUnhandledThreadExceptionWarning")  # RETURNN's preload thread
def test_shuffle_frames_of_nseqs_is_refused_as_returnns_torch_path_misaligns_frames_and_targets(hdfs):
    """Why shuffle_frames_of_nseqs stays refused: RETURNN gives the config's value to the train dataset; its
    HDFDataset (with the cache __main__.load_data gives it) shuffles the input frames of each 2 sequences but fails
    on the targets in its preload thread (TypeError), so they stay in order, no longer aligned with their frames; a
    generating dataset stops on it (AssertionError). Here the config stops with that reason."""
    from framework.base.config import load_config

    whole = write_returnn_hdf(hdfs[0] + ".4", [f"c/{i}" for i in range(4)], [4, 2, 6, 3], seed=3)
    hdf = {"class": "HDFDataset", "files": [whole]}
    theirs = _returnn_loaded({"shuffle_frames_of_nseqs": 2, "train": hdf})["train"]
    plain = sorted(returnn_epoch(hdf), key=lambda item: item[0])
    assert [tag for tag, _ in theirs] == [tag for tag, _ in plain]
    moved = [not np.array_equal(a["data"], b["data"]) for (_, a), (_, b) in zip(theirs, plain, strict=True)]
    assert any(moved)  # the frames moved within their pairs of sequences ...
    assert all(np.array_equal(a["classes"], b["classes"]) for (_, a), (_, b) in zip(theirs, plain, strict=True))
    pooled = lambda seqs, i, j: np.sort(np.concatenate([seqs[i][1]["data"], seqs[j][1]["data"]]), axis=0)  # noqa: E731
    assert np.array_equal(pooled(theirs, 0, 1), pooled(plain, 0, 1))  # ... of the same pair; the targets did not
    with pytest.raises(AssertionError):
        returnn_epoch({"class": "Task12AXDataset", "num_seqs": 4, "shuffle_frames_of_nseqs": 2})
    config = hdfs[0] + ".py"
    with open(config, "w", encoding="utf-8") as f:
        f.write(f"train = {hdf!r}\nshuffle_frames_of_nseqs = 2\n")
    with pytest.raises(ConfigError, match="shuffle_frames_of_nseqs.*targets"):
        load_config([config])
    with pytest.raises(ConfigError, match="shuffle_frames_of_nseqs = 2"):
        _ours({**hdf, "shuffle_frames_of_nseqs": 2})


def test_use_dummy_datasets_replaces_the_datasets_as_returnns_setup_dummy_datasets(tmp_path):
    """RETURNN's __main__.setup_dummy_datasets rewrites the config's datasets to DummyGenericDataset dicts; here the
    same dicts are built (counts from dummy_dataset_num_seqs / train_dummy_dataset_num_seqs, crc32 seeds), and the
    datasets give RETURNN's sequences: the same tags, order and values (max abs difference 0)."""
    import returnn.__main__ as returnn_main
    from returnn.config import Config as ReturnnConfig

    from framework.core.build import dummy_datasets, init_forward_data

    extern_data = {"data": {"dim": 3}, "classes": {"dim": 5, "sparse": True}}
    base = {"extern_data": extern_data, "use_dummy_datasets": True, "batching": "default"}
    hdf_like = {"class": "NoSuchDataset"}  # never built: replaced
    cases = [
        ({"train": hdf_like, "dev": hdf_like, "train_dummy_dataset_num_seqs": 40}, {"train": 40, "dev": 2}),
        ({"train": hdf_like, "eval_datasets": {"other": hdf_like}, "dummy_dataset_num_seqs": 7}, {"train": 7}),
        ({"train": hdf_like, "dev": hdf_like}, {"train": 1000, "dev": 50}),
    ]
    compared = 0
    for options, counts in cases:
        config = ReturnnConfig({"backend": "torch", **base, **options})
        returnn_main.config = config
        returnn_main.setup_dummy_datasets()
        ours_config = Config.from_dict({**base, **options})
        get = dummy_datasets(ours_config)
        for name in ("train", "dev", "eval_datasets"):
            assert get(name) == config.typed_value(name), name
        _, loaders = init_data(ours_config, ["train", "dev"], "train", torch.device("cpu"))
        theirs_specs = {"train": config.typed_value("train"), "dev": config.typed_value("dev")}
        theirs_specs.update(config.typed_value("eval_datasets") or {})
        for name, loader in loaders.items():
            spec = theirs_specs[name]
            if name in counts:
                assert spec["num_seqs"] == counts[name], name
            dataset = loader.dataset
            ours = [(dataset.seq_tag(int(i)), dataset.get_seq(int(i))) for i in dataset.get_seq_order(1)][:60]
            assert assert_same(ours, returnn_epoch(spec)[:60]) == 0.0, name
            compared += len(ours)
    forward = Config.from_dict({**base, "forward_data": "dev", "dev": hdf_like, "dummy_dataset_num_seqs": 5})
    dataset, _, _ = init_forward_data(forward, torch.device("cpu"))
    config = ReturnnConfig({**base, "forward_data": "dev", "dev": hdf_like, "dummy_dataset_num_seqs": 5})
    returnn_main.config = config
    returnn_main.setup_dummy_datasets()
    mine = [(dataset.seq_tag(int(i)), dataset.get_seq(int(i))) for i in dataset.get_seq_order(1)]
    assert assert_same(mine, returnn_epoch(config.typed_value("forward_data"))) == 0.0
    assert compared > 100
    with pytest.raises(ConfigError, match="define extern_data"):
        dummy_datasets(Config.from_dict({"use_dummy_datasets": True, "train": hdf_like}))("train")
