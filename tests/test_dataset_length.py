"""A dataset's num_seqs against what its get_seq serves (framework.check_library.dataset_length): a class that counts
an outer [inputs, labels] list is named; one that ends at its length, or wraps around, is not."""

import numpy as np

from framework.check_library.dataset_length import length_finding
from framework.datasets.base import Dataset


class _Pairs(Dataset):
    """(inputs, labels) kept as one list of two arrays."""

    def __init__(self, count_outer: bool, wrap: bool = False, generate: bool = False):
        super().__init__()
        self.generate = generate
        rng = np.random.default_rng(0)
        self.pairs = [rng.normal(size=(500, 3)).astype(np.float32), rng.integers(0, 4, size=500)]
        self.count_outer, self.wrap = count_outer, wrap

    @property
    def num_seqs(self):
        return len(self.pairs) if self.count_outer else len(self.pairs[0])

    def key_info(self):
        return {
            "data": {"shape": (3,), "dtype": "float32"},
            "classes": {"shape": (), "dtype": "int64", "sparse_dim": 4},
        }

    def get_seq(self, index):
        if self.generate:  # a sequence made from its index: any index answers
            rng = np.random.default_rng(index)
            return {"data": rng.normal(size=3).astype(np.float32), "classes": np.array(rng.integers(0, 4))}
        if self.wrap:
            index %= self.num_seqs
        return {"data": self.pairs[0][index], "classes": np.array(self.pairs[1][index])}


def test_a_length_that_counts_the_outer_list_is_named_with_how_far_get_seq_answers():
    finding = length_finding("train", _Pairs(count_outer=True))
    assert finding is not None and finding.severity == "warning"
    assert (
        "says it holds 2 sequence(s) (num_seqs), but get_seq returns other sequences past that, up to index "
        "256 at least (128x as many): every epoch trains on the first 2 only" in finding.message
    )
    assert "dev scores the first 2 only" in length_finding("dev", _Pairs(count_outer=True)).message


class _View(Dataset):
    """The first 900 rows of one array of 1000 as train, get_seq without a bounds check of its own."""

    def __init__(self):
        super().__init__()
        self.rows = np.random.default_rng(0).normal(size=(1000, 3)).astype(np.float32)

    @property
    def num_seqs(self):
        return 900

    def key_info(self):
        return {"data": {"shape": (3,), "dtype": "float32"}}

    def get_seq(self, index):
        return {"data": self.rows[index]}


def test_a_dataset_that_ends_at_its_length_wraps_around_or_makes_sequences_from_the_index_is_not_named():
    assert length_finding("train", _View()) is None  # a view of a larger array, not a length of the wrong thing
    assert length_finding("train", _Pairs(count_outer=False)) is None
    assert length_finding("train", _Pairs(count_outer=True, wrap=True)) is None
    assert length_finding("train", _Pairs(count_outer=True, generate=True)) is None
