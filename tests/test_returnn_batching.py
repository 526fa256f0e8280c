"""Batching against RETURNN's torch data pipeline (returnn/torch/data/pipeline.py BatchingIterDataPipe): the same
sequences in the same order give the same batches, batch by batch (padded frames of every key, max_seqs, a sequence
longer than batch_size alone, the last partial batch). The step counts of a RETURNN config differ from RETURNN's
only through the data: Task12AXDataset here draws lengths 10-50, RETURNN's 10-99."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from framework.datasets import batching
from framework.datasets.batching import make_batches


def _returnns(lengths, order, batch_size, max_seqs) -> list[list[int]]:
    from returnn.torch.data.pipeline import BatchingIterDataPipe

    seqs = [
        {"data": np.zeros((lengths[i], 3), "float32"), "classes": np.zeros((lengths[i],), "int32"), "idx": np.array(i)}
        for i in order
    ]

    class Sequences(torch.utils.data.IterableDataset):
        def __iter__(self):
            return iter(seqs)

    pipe = BatchingIterDataPipe(Sequences(), batch_size=batch_size, max_seqs=max_seqs)
    return [[int(seq["idx"]) for seq in batch] for batch in pipe]


def _cases(count: int = 200):
    rng = np.random.default_rng(0)
    for _ in range(count):
        n = int(rng.integers(1, 60))
        yield (
            rng.integers(1, 120, n),
            rng.permutation(n),
            int(rng.choice([50, 100, 200, 500, 5000])),
            int(rng.choice([1, 3, 10, 40, 1000])),
        )


def test_batches_are_returnns_batch_by_batch():
    for lengths, order, batch_size, max_seqs in _cases():
        ours = [list(map(int, batch)) for batch in make_batches(order, lengths, batch_size, max_seqs)]
        assert ours == _returnns(lengths, order, batch_size, max_seqs), (lengths[order], batch_size, max_seqs)


def test_a_planted_bug_in_the_batching_fails_the_comparison(monkeypatch):
    """Splitting when the padded frames reach batch_size (RETURNN splits only above it) gives other batches."""
    real = batching.make_batches

    def at_the_limit(order, lengths, batch_size, max_seqs):
        return real(order, lengths, batch_size - 1, max_seqs)

    monkeypatch.setattr(batching, "make_batches", at_the_limit)
    differ = sum(
        [list(map(int, b)) for b in batching.make_batches(o, L, bs, ms)] != _returnns(L, o, bs, ms)
        for L, o, bs, ms in _cases(60)
    )
    assert differ > 0


@pytest.mark.parametrize("num_seqs, max_seqs, ordering", [(30, 4, "sorted"), (100, 10, None)])
def test_the_step_counts_differ_from_returnns_only_through_task12ax_data(num_seqs, max_seqs, ordering):
    """At batch_size 200, RETURNN's own Task12AXDataset and pipeline (30 sequences, max_seqs 4, 'sorted': 13 batches)
    and this batching on RETURNN's sequences in RETURNN's order give the same batches; this framework's
    Task12AXDataset draws shorter sequences (10-50 frames), which fit more to a batch (8 batches there)."""
    from returnn.config import Config as ReturnnConfig
    from returnn.config import global_config_ctx
    from returnn.datasets import init_dataset
    from returnn.torch.data.pipeline import BatchingIterDataPipe
    from returnn.torch.data.returnn_dataset_wrapper import ReturnnDatasetIterDataPipe

    spec = {"class": "Task12AXDataset", "num_seqs": num_seqs, **({"seq_ordering": ordering} if ordering else {})}
    with global_config_ctx(ReturnnConfig({})):
        dataset = init_dataset(spec)
        dataset.init_seq_order(epoch=1)
        lengths = []
        while dataset.is_less_than_num_seqs(len(lengths)):
            dataset.load_seqs(len(lengths), len(lengths) + 1)
            lengths.append(dataset.get_seq_length(len(lengths))["data"])
        dataset.init_seq_order(epoch=1)
        pipe = BatchingIterDataPipe(ReturnnDatasetIterDataPipe(dataset), batch_size=200, max_seqs=max_seqs)
        theirs = [len(batch) for batch in pipe]
    ours = [len(batch) for batch in make_batches(np.arange(len(lengths)), np.array(lengths), 200, max_seqs)]
    assert ours == theirs
    assert max(lengths) > 50  # RETURNN's lengths reach 99; this framework's Task12AXDataset stops at 50
