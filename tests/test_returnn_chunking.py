"""RETURNN's ``chunking`` and ``online_shuffle_batches``: the chunks of each sequence and the shuffled blocks of
batches, compared with RETURNN's own data pipes (ChunkingIterDataPipe, ShufflingDataPipe) on the same data."""

from __future__ import annotations

import numpy as np
import pytest

from framework.base.errors import ConfigError
from framework.datasets.chunking import ChunkedDataset
from framework.datasets.loader import shuffled_in_blocks
from framework.datasets.numpy_dataset import NumpyDataset

LENGTHS = [7, 3, 12, 1, 5]


def _sequences(rate: int = 1) -> dict[str, list[np.ndarray]]:
    """``data`` [rate * T, 2] features and ``classes`` [T], with values that tell the frames apart."""
    return {
        "data": [
            np.arange(rate * n * 2, dtype=np.float32).reshape(rate * n, 2) + 1000 * i for i, n in enumerate(LENGTHS)
        ],
        "classes": [np.arange(n, dtype=np.int32) + 100 * i for i, n in enumerate(LENGTHS)],
    }


@pytest.mark.parametrize(
    ("chunking", "min_chunk_size", "rate"),
    [
        ("5:3", 0, 1),
        (4, 2, 1),
        ((6, 4), 0, 1),
        (({"data": 10, "classes": 5}, {"data": 6, "classes": 3}), 0, 2),  # keys at different rates
        (({"classes": 4}, {"classes": 2}), 0, 1),  # data not named: whole in every chunk
    ],
)
def test_chunks_are_returnns(chunking, min_chunk_size, rate):
    from returnn.torch.data.pipeline import ChunkingIterDataPipe

    sequences = _sequences(rate)
    dicts = [{key: sequences[key][i] for key in sequences} for i in range(len(LENGTHS))]
    theirs = list(ChunkingIterDataPipe(dicts, chunking, min_chunk_size=min_chunk_size))
    dataset = NumpyDataset(sequences, sparse_dims={"classes": 1000}, seq_ordering="default")
    ours = ChunkedDataset(dataset, chunking, min_chunk_size)
    order = ours.get_seq_order(1)
    assert len(order) == ours.num_seqs == len(theirs)
    for index, chunk in zip(order, theirs, strict=True):
        seq = ours.get_seq(int(index))
        assert set(seq) == set(chunk)
        for key in chunk:
            np.testing.assert_array_equal(seq[key], chunk[key])
    for key in ("data", "classes"):
        assert list(ours.lengths_of(key)) == [len(ours.get_seq(i)[key]) for i in range(ours.num_seqs)]


def test_max_seq_length_leaves_out_whole_sequences_before_they_are_cut_and_bad_chunking_is_named():
    dataset = NumpyDataset(_sequences(), sparse_dims={"classes": 1000}, seq_ordering="default")
    ours = ChunkedDataset(dataset, "5:5", 0, seq_length_limits=(None, 6))  # the 7 and 12 frames long ones go
    assert [ours.seq_tag(int(i)) for i in ours.get_seq_order(1)] == ["seq-1[0]", "seq-3[0]", "seq-4[0]"]
    with pytest.raises(ConfigError, match="different numbers of chunks per key"):
        ChunkedDataset(dataset, ({"data": 5, "classes": 2}, {"data": 5, "classes": 2}))
    with pytest.raises(ConfigError, match="'size:step'"):
        ChunkedDataset(dataset, "5-3")


def test_online_shuffle_batches_shuffles_blocks_of_batches_as_returnn():
    from returnn.torch.data.pipeline import ShufflingDataPipe

    batches = [[{"seq_idx": i, "complete_frac": (i + 1) / 23}] for i in range(23)]
    pipe = ShufflingDataPipe(batches, buffer_size=5, monotonic_data_keys=(), seed=3)
    pipe.reset()
    theirs = [batch[0]["seq_idx"] for batch in pipe]
    ours = [int(b[0]) for b in shuffled_in_blocks([np.array([i]) for i in range(23)], 5, seed=3, epoch=1)]
    blocks = [slice(start, start + 5) for start in range(0, 23, 5)]
    assert (
        [sorted(theirs[b]) for b in blocks] == [sorted(ours[b]) for b in blocks] == [list(range(23))[b] for b in blocks]
    )
    assert ours != list(range(23))  # shuffled, the same for the same epoch, another order in another one
    again = [int(b[0]) for b in shuffled_in_blocks([np.array([i]) for i in range(23)], 5, seed=3, epoch=1)]
    other = [int(b[0]) for b in shuffled_in_blocks([np.array([i]) for i in range(23)], 5, seed=3, epoch=2)]
    assert again == ours != other


def test_the_train_loader_plans_its_batches_in_shuffled_blocks_when_the_config_asks():
    import torch

    from framework.base.config import Config
    from framework.core.build import make_loader, online_shuffle_batches

    dataset = NumpyDataset(_sequences(), sparse_dims={"classes": 1000}, seq_ordering="default")
    config = Config({"online_shuffle_batches": {"buffer_size": 3}, "batch_size": 100, "max_seqs": 1})
    assert online_shuffle_batches(config) == (3, 42)  # the seed: random_seed's default
    loaders = {option: make_loader(config, option, dataset, {}, torch.device("cpu")) for option in ("train", "dev")}
    assert [int(b[0]) for b in loaders["dev"].plan(1)] == [0, 1, 2, 3, 4]  # only training shuffles
    train = [int(b[0]) for b in loaders["train"].plan(1)]
    assert train != [0, 1, 2, 3, 4] and [sorted(train[:3]), sorted(train[3:])] == [[0, 1, 2], [3, 4]]
    with pytest.raises(ConfigError, match="give the buffer size"):
        online_shuffle_batches(Config({"online_shuffle_batches": {"size": 2}}))
