"""RETURNN's data options, each compared with RETURNN's own code on the same data: the options its torch engine
leaves without effect (chunk_eval, on_size_limit, context_window: RETURNN's engine gives the same dev batches with and
without them), and those implemented here with RETURNN's meaning."""

from __future__ import annotations

import pytest
import torch

from framework.base.config import load_config
from framework.base.returnn_options import status


def _returnn_dev_batches(options: dict) -> list[list[float]]:
    """The dev batches of RETURNN's torch engine for a config with ``options``: the dev dataset as RETURNN's
    ``__main__.init_data`` builds it (``get_default_kwargs_eval``, ``kwargs_update_from_config``) and
    ``Engine._create_data_loader`` batches it; each batch as its data's sums per sequence."""
    import returnn.__main__ as returnn_main
    from returnn.config import Config as ReturnnConfig
    from returnn.config import global_config_ctx
    from returnn.datasets.basic import Dataset as ReturnnDataset
    from returnn.torch.engine import Engine

    config = ReturnnConfig(
        {
            "backend": "torch",
            "device": "cpu",
            "task": "train",
            "batch_size": 40,
            "chunking": "5:3",
            "torch_dataloader_opts": {"num_workers": 0},  # the same batches, without a worker process to start
            "dev": {"class": "Task12AXDataset", "num_seqs": 6, "fixed_random_seed": 1},
            **options,
        }
    )
    with global_config_ctx(config):
        returnn_main.config = config
        dev, _ = returnn_main.load_data(config, 0, "dev", **ReturnnDataset.get_default_kwargs_eval(config=config))
        engine = Engine(config)
        engine._epoch_mp_shared.value = 1
        loader = engine._create_data_loader(dev, train=False)
        return [batch["data"].sum(dim=(1, 2)).tolist() for batch in loader]


def test_returnns_torch_engine_gives_the_same_dev_batches_without_these_options(tmp_path):
    """RETURNN sets the dev dataset's own chunking or context from these options, which only its TensorFlow batch
    generator reads: its torch engine's dev batches (cut by the config's chunking) are the same as without them.
    Here they are accepted and listed in the startup note."""
    cases = [
        {"chunk_eval": True},
        {"on_size_limit": "chunk"},
        {"context_window": 5, "chunk_eval": True},
        {"context_window": ({"data": 2}, {"data": 3}), "on_size_limit": "chunk"},
    ]
    plain = _returnn_dev_batches({})
    assert len(plain) > 1 and max(len(batch) for batch in plain) > 1
    for options in cases:
        assert _returnn_dev_batches(options) == plain, options
    path = tmp_path / "c.py"
    path.write_text(
        "train = {'class': 'Task12AXDataset', 'num_seqs': 5}\nchunk_eval = True\n"
        "on_size_limit = 'chunk'\ncontext_window = 5\n"
    )
    config = load_config([str(path)])
    for name in ("chunk_eval", "on_size_limit", "context_window"):
        assert name in config.without_effect
        assert status(name)[0] == "no effect"


def test_lm_dataset_debug_limit_line_count_reads_returnns_lines_and_partition_epoch(tmp_path):
    """RETURNN's LmDataset with the config's line limit: the first lines of each gzipped file (the same tags, ids and
    sub-epochs), partition_epoch shrunk by RETURNN's estimate from the compressed file's read position, and a stop
    on a plain-text file that reaches the limit (RETURNN: AssertionError)."""
    import gzip

    import numpy as np
    from returnn.config import Config as ReturnnConfig
    from returnn.config import global_config_ctx
    from returnn.datasets.basic import init_dataset as returnn_init_dataset
    from test_returnn_datasets_more import assert_same, our_epoch, returnn_epoch

    from framework.base.errors import ConfigError
    from framework.datasets import init_dataset

    rng = np.random.default_rng(0)
    words = ["the", "cat", "sat", "on", "a", "mat"]
    lines = [" ".join(rng.choice(words, int(rng.integers(1, 9)))) for _ in range(60000)]
    big, small = tmp_path / "big.txt.gz", tmp_path / "small.txt.gz"
    with gzip.open(big, "wt") as f:  # 160 KB compressed: the reader stops well before its end
        f.write("\n".join(lines[:30000]) + "\n\n" + "\n".join(lines[30000:]) + "\n")
    with gzip.open(small, "wt") as f:
        f.write("\n".join(lines[:7]) + "\n")
    (tmp_path / "plain.txt").write_text("\n".join(lines[:50]) + "\n")
    (tmp_path / "words.txt").write_text("".join(f"{w} {i}\n" for i, w in enumerate(["[END]", "[UNKNOWN]", *words])))
    spec = {
        "class": "LmDataset",
        "corpus_file": [str(big), str(small)],
        "orth_symbols_map_file": str(tmp_path / "words.txt"),
        "word_based": True,
        "partition_epoch": 400,
        "seq_ordering": "default",
    }
    compared = 0
    try:
        for limit in (1000, 5, 0):
            config_file = tmp_path / "c.py"
            config_file.write_text(f"lm_dataset_debug_limit_line_count = {limit}\n")
            load_config([str(config_file)])
            with global_config_ctx(ReturnnConfig({"lm_dataset_debug_limit_line_count": limit})):
                theirs = returnn_init_dataset(dict(spec))
                theirs.init_seq_order(epoch=1)  # RETURNN reads the corpus here
                ours = init_dataset(dict(spec), option="dev", random_seed=1)
                assert ours.partition_epoch == theirs.partition_epoch < 400, limit
                assert len(ours.corpus) == max(limit, 1) + min(max(limit, 1), 7)
                for epoch in (1, 2, theirs.partition_epoch):
                    mine = our_epoch(spec, epoch)
                    assert_same(mine, returnn_epoch(spec, epoch))
                    compared += len(mine)
            plain = {**spec, "corpus_file": str(tmp_path / "plain.txt")}
            if limit < 50:  # the plain file's 50 lines reach the limit
                with pytest.raises(ConfigError, match="not gzipped text.*RETURNN stops there too"):
                    init_dataset(plain, option="dev", random_seed=1)
                with global_config_ctx(ReturnnConfig({"lm_dataset_debug_limit_line_count": limit})):
                    with pytest.raises(AssertionError):
                        returnn_init_dataset(dict(plain)).init_seq_order(epoch=1)
            else:
                assert len(init_dataset(plain, option="dev", random_seed=1).corpus) == 50
    finally:  # the next tests' datasets are not built under this config
        (tmp_path / "c.py").write_text("lm_dataset_debug_limit_line_count = None\n")
        load_config([str(tmp_path / "c.py")])
    assert compared > 0
    print(f"compared {compared} sequences")


def test_packed_batch_size_gives_returnns_batches():
    """RETURNN's BatchingIterDataPipe with packed_batch_size (summed frames without padding, per key; a number limits
    every key, fixed-shape ones too) against this loader's plan on the same sequences in the same order: 150 random
    cases with a padded budget, a sequence cap and a packed budget, batch by batch."""
    import numpy as np
    import torch
    from returnn.torch.data.pipeline import BatchingIterDataPipe

    from framework.datasets.loader import BatchLoader
    from framework.datasets.numpy_dataset import NumpyDataset

    rng = np.random.default_rng(0)
    differ_from_unpacked = 0
    for case in range(150):
        n = int(rng.integers(1, 50))
        frames, labels = rng.integers(1, 100, n), rng.integers(1, 40, n)
        sequences = {
            "data": [np.full((t, 2), i, np.float32) for i, t in enumerate(frames)],
            "classes": [np.zeros(t, np.int32) for t in labels],
            "speaker": [np.zeros(3, np.float32) for _ in range(n)],  # fixed shape: RETURNN counts its 3 frames
        }
        batch_size = int(rng.choice([100, 300, 5000]))
        max_seqs = int(rng.choice([2, 10, 1000]))
        packed = [int(rng.choice([60, 150, 400])), {"classes": int(rng.choice([30, 90]))}][case % 2]
        dicts = [{key: sequences[key][i] for key in sequences} for i in range(n)]
        pipe = BatchingIterDataPipe(dicts, batch_size=batch_size, max_seqs=max_seqs, packed_batch_size=packed)
        theirs = [[int(seq["data"][0, 0]) for seq in batch] for batch in pipe]
        dataset = NumpyDataset(sequences, sparse_dims={"classes": 5}, seq_ordering="default")
        loader = BatchLoader(
            dataset,
            {},
            option="train",
            batch_size=batch_size,
            max_seqs=max_seqs,
            device=torch.device("cpu"),
            packed_batch_size=packed,
        )
        ours = [list(map(int, batch)) for batch in loader.plan(1)]
        assert ours == theirs, (case, frames, labels, batch_size, max_seqs, packed)
        unpacked = BatchLoader(
            dataset, {}, option="train", batch_size=batch_size, max_seqs=max_seqs, device=torch.device("cpu")
        )
        differ_from_unpacked += [list(map(int, b)) for b in unpacked.plan(1)] != ours
    assert differ_from_unpacked > 50  # the packed budget decides many of the cases


def test_a_dataset_dicts_own_chunking_and_context_window_leave_returnns_torch_batches_as_they_are():
    """A dataset dict's chunking, context_window, min_chunk_size and chunking_variance set the dataset's own chunking,
    which only RETURNN's TensorFlow batch generator reads: RETURNN's torch engine gives the same dev batches with them
    (cut by the config's chunking). Here they are accepted, with a log line, and the batches are the same too."""
    from framework.datasets import init_dataset

    dev = {"class": "Task12AXDataset", "num_seqs": 6, "fixed_random_seed": 1}
    own = [
        {"chunking": "3:2"},
        {"context_window": 3},
        {"context_window": ({"data": 1}, {"data": 2}), "chunking": 4, "min_chunk_size": 2, "chunking_variance": 0.5},
    ]
    plain = _returnn_dev_batches({})
    for options in own:
        assert _returnn_dev_batches({"dev": {**dev, **options}}) == plain, options
        ours = init_dataset({**dev, **options}, option="dev", random_seed=1)
        base = init_dataset(dev, option="dev", random_seed=1)
        order = base.get_seq_order(1)
        assert (ours.get_seq_order(1) == order).all()
        for i in order:
            assert all((ours.get_seq(int(i))[k] == base.get_seq(int(i))[k]).all() for k in ("data", "classes"))


def test_packed_batch_cost_gives_returnns_batches():
    """RETURNN's BatchingIterDataPipe with packed_batch_cost (per-sequence costs of its lengths, each bounded by the
    packed_batch_size entry of its name) against this loader's plan on the same sequences: 120 random cases with
    integer and float costs, with and without a data key's packed limit and max_seqs, batch by batch."""
    import numpy as np
    import torch
    from returnn.torch.data.pipeline import BatchingIterDataPipe

    from framework.base.errors import ConfigError
    from framework.datasets.loader import BatchLoader
    from framework.datasets.numpy_dataset import NumpyDataset

    costs = [
        {"cells": lambda lengths: lengths["data"] * lengths["classes"]},
        {"frac": lambda lengths: lengths["data"] / 3.0 + 0.5, "cells": lambda lengths: lengths["classes"] ** 2},
    ]
    rng = np.random.default_rng(1)
    differ = 0
    for case in range(120):
        n = int(rng.integers(1, 40))
        frames, labels = rng.integers(1, 60, n), rng.integers(1, 30, n)
        sequences = {
            "data": [np.full((t, 2), i, np.float32) for i, t in enumerate(frames)],
            "classes": [np.zeros(t, np.int32) for t in labels],
        }
        cost = costs[case % 2]
        packed = {name: int(rng.choice([300, 900, 3000])) for name in cost}
        if case % 3 == 0:
            packed["data"] = int(rng.choice([80, 200]))
        batch_size, max_seqs = int(rng.choice([300, 5000])), int(rng.choice([3, 1000]))
        dicts = [{key: sequences[key][i] for key in sequences} for i in range(n)]
        pipe = BatchingIterDataPipe(
            dicts, batch_size=batch_size, max_seqs=max_seqs, packed_batch_size=packed, packed_batch_cost=cost
        )
        theirs = [[int(seq["data"][0, 0]) for seq in batch] for batch in pipe]
        dataset = NumpyDataset(sequences, sparse_dims={"classes": 5}, seq_ordering="default")
        options = dict(option="train", batch_size=batch_size, max_seqs=max_seqs, device=torch.device("cpu"))
        loader = BatchLoader(dataset, {}, packed_batch_size=packed, packed_batch_cost=cost, **options)
        ours = [list(map(int, batch)) for batch in loader.plan(1)]
        assert ours == theirs, (case, frames, labels, batch_size, max_seqs, packed)
        plain = BatchLoader(dataset, {}, **options)
        differ += [list(map(int, b)) for b in plain.plan(1)] != ours
    assert differ > 40  # the costs decide many of the cases
    no_limit = BatchLoader(dataset, {}, packed_batch_size=100, packed_batch_cost=costs[0], **options)
    with pytest.raises(ConfigError, match=r"explicit packed_batch_size\['cells'\] entry"):
        no_limit.plan(1)


class _PairsByLength(torch.utils.data.IterableDataset):
    """A batching callable as RETURNN configs write them: the stream's sequences sorted by length within a buffer of
    6, in pairs (RETURNN calls it as cls(dataset, train=..., **kwargs) and wants a torch IterableDataset)."""

    def __init__(self, dataset, *, train, **_kwargs):
        super().__init__()
        self.dataset, self.train = dataset, train

    def __iter__(self):
        buffer = []
        for seq in self.dataset:
            buffer.append(seq)
            if len(buffer) == 6:
                yield from self._pairs(buffer)
                buffer = []
        yield from self._pairs(buffer)

    @staticmethod
    def _pairs(buffer):
        ordered = sorted(buffer, key=lambda seq: (seq["data"].shape[0], int(seq["seq_idx"])))
        for i in range(0, len(ordered), 2):
            yield ordered[i : i + 2]


def test_torch_batching_gives_returnns_batches():
    """RETURNN's torch engine with torch_batching (a callable; RETURNN's BucketOrderingIterDataPipe named in a dict)
    against this framework's plan on the same dev data (Task12AX, 30 sequences, as RETURNN's __main__ builds it):
    the same batches, batch by batch, with and without the config's chunking."""
    import returnn.__main__ as returnn_main
    import torch
    from returnn.config import Config as ReturnnConfig
    from returnn.config import global_config_ctx
    from returnn.datasets.basic import Dataset as ReturnnDataset
    from returnn.torch.engine import Engine

    from framework.base.config import Config
    from framework.core.build import init_data

    cases = [
        {"torch_batching": _PairsByLength},
        {
            "torch_batching": {
                "class": "BucketOrderingIterDataPipe",
                "buckets": [(20, 4), (35, 2), (60, 1)],
                "length_key": "data",
            }
        },
        {"torch_batching": _PairsByLength, "chunking": "10:7"},
    ]
    for options in cases:
        config = ReturnnConfig(
            {
                "backend": "torch",
                "device": "cpu",
                "task": "train",
                "behavior_version": 21,
                "torch_dataloader_opts": {"num_workers": 0},
                "dev": {"class": "Task12AXDataset", "num_seqs": 30, "fixed_random_seed": 1},
                **options,
            }
        )
        with global_config_ctx(config):
            returnn_main.config = config
            data, _ = returnn_main.load_data(config, 0, "dev", **ReturnnDataset.get_default_kwargs_eval(config=config))
            engine = Engine(config)
            engine._epoch_mp_shared.value = 1
            theirs = [[str(tag) for tag in b["seq_tag"]] for b in engine._create_data_loader(data, train=False)]
            # the same sequences here: RETURNN's draws, written to an HDF file by RETURNN's own writer
            path = _dump_hdf(data, config)
        ours_config = Config.from_dict(
            {
                "dev": {"class": "HDFDataset", "files": [path]},
                "extern_data": {"data": {"dim": 9}, "classes": {"dim": 2, "sparse": True}},
                **options,
            }
        )
        _, loaders = init_data(ours_config, ["dev"], "dev", torch.device("cpu"))
        loader = loaders["dev"]
        ours = [[loader.dataset.seq_tag(int(i)) for i in batch] for batch in loader.plan(1)]
        if "chunking" in options:  # chunk tags: RETURNN repeats the sequence's tag, here it names the chunk's start
            ours = [[tag.split("[")[0] for tag in batch] for batch in ours]
        assert ours == theirs, options
        assert len(theirs) > 5 and any(len(batch) > 1 for batch in theirs)


def _dump_hdf(dataset, config) -> str:
    """RETURNN's dataset's epoch-1 sequences, in its order, written by RETURNN's SimpleHDFWriter."""
    import os
    import tempfile

    import numpy as np
    from returnn.datasets.hdf import SimpleHDFWriter

    path = os.path.join(tempfile.mkdtemp(), "dev.hdf")
    writer = SimpleHDFWriter(path, dim=9, ndim=2, extra_type={"classes": (2, 1, "int32")})
    dataset.init_seq_order(epoch=1)
    i = 0
    while dataset.is_less_than_num_seqs(i):
        dataset.load_seqs(i, i + 1)
        data, classes = dataset.get_data(i, "data"), dataset.get_data(i, "classes")
        writer.insert_batch(
            data[None].astype(np.float32),
            seq_len=[len(data)],
            seq_tag=[dataset.get_tag(i)],
            extra={"classes": classes[None].astype(np.int32)},
        )
        i += 1
    writer.close()
    return path


def _pairs_generator(dataset, *, train, **_kwargs):
    """Batches as a plain generator: an iterable, but no torch IterableDataset."""
    buffer = []
    for seq in dataset:
        buffer.append(seq)
        if len(buffer) == 2:
            yield buffer
            buffer = []


class _NoKwargs(_PairsByLength):
    def __init__(self, dataset, *, train):
        super().__init__(dataset, train=train)


def test_torch_batching_is_refused_where_returnns_pipeline_refuses_it():
    """RETURNN's get_batching_iterable_dataset_from_config calls a torch_batching callable with train= and a randomly
    named keyword and asserts that it returns a torch IterableDataset: a generator function and a class without
    **kwargs fail there; here they stop with a config error that says what RETURNN requires. A torch IterableDataset
    class with **kwargs batches."""
    import numpy as np
    from returnn.config import Config as ReturnnConfig
    from returnn.torch.data.pipeline import get_batching_iterable_dataset_from_config

    from framework.base.errors import ConfigError
    from framework.datasets import init_dataset
    from framework.datasets.custom_batching import custom_batches

    dataset = init_dataset({"class": "Task12AXDataset", "num_seqs": 6}, option="dev", random_seed=1)
    order = np.arange(dataset.num_seqs)
    for refused, match in ((_pairs_generator, "not a torch.utils.data.IterableDataset"), (_NoKwargs, r"\*\*kwargs")):
        with pytest.raises((AssertionError, TypeError)):  # RETURNN's own check
            get_batching_iterable_dataset_from_config(
                dataset=torch.utils.data.IterableDataset(),
                config=ReturnnConfig({"torch_batching": refused}),
                train=False,
            )
        with pytest.raises(ConfigError, match=match):
            custom_batches(dataset, order, refused, train=False, epoch=1)
    batches = custom_batches(dataset, order, _PairsByLength, train=False, epoch=1)
    assert sorted(np.concatenate(batches).tolist()) == order.tolist() and len(batches) == 3
