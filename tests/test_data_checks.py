"""The data check names empty sequences (length 0): dataset, key, how many, which (issue 27, item 6)."""

import numpy as np

from framework.check_library.data_checks import Sample, key_findings
from framework.datasets import NumpyDataset
from framework.datasets.base import Dataset
from framework.datasets.extern_data import DataKey
from tests.conftest import run_rnn, write_config

_EMPTY = [37, 120, 255, 301]
_CONFIG = f"""
import numpy as np
from torch import nn

_rng = np.random.default_rng(0)
_lengths = _rng.integers(1, 10, 400)
_lengths[{_EMPTY}] = 0
train = {{"class": "NumpyDataset", "arrays": {{"data": [_rng.normal(size=(n, 4)).astype("float32") for n in _lengths],
         "classes": _rng.integers(0, 3, 400)}}, "sparse_dims": {{"classes": 3}}}}
extern_data = {{"data": {{"shape": (None, 4)}}, "classes": {{"shape": (), "sparse_dim": 3}}}}
batch_size = 100
max_seqs = 16
num_epochs = 1
optimizer = {{"class": "adam"}}
learning_rate = 1e-3


def get_model(**_kwargs):
    return nn.Linear(4, 3)


def train_step(*, model, extern_data, run_ctx, **_kwargs):
    frames, lengths = extern_data["data"], extern_data["data:seq_len"]
    pooled = frames.sum(1) / lengths.clamp(min=1)[:, None].to(frames)  # this model copes with length 0
    run_ctx.mark_as_loss(name="ce", loss=nn.functional.cross_entropy(model(pooled), extern_data["classes"]))
"""
_DATA = DataKey("data", (None, 4), "float32")


def test_empty_sequences_are_named_though_the_sampled_batches_hold_none(tmp_path):
    result = run_rnn(write_config(tmp_path, _CONFIG), "++model", "'out/model'", cwd=str(tmp_path))
    assert result.returncode == 0, result.stderr  # a warning: the model here handles them
    (line,) = [line for line in result.stdout.splitlines() if "empty (length 0)" in line and line.startswith("WARN")]
    assert line.startswith(
        "WARNING sanity check (data): dataset 'train' (NumpyDataset) key 'data': 4 of 400 sequences are empty "
        "(length 0), at sequence indices 37, 120, 255, 301."
    )


def _sequences(lengths):
    rng = np.random.default_rng(0)
    return [rng.normal(size=(n, 4)).astype(np.float32) for n in lengths]


def _findings(dataset, indices=(0, 1, 2, 3), key=_DATA):
    indices = np.asarray(indices)
    return key_findings("train", dataset.name, key, Sample([(indices, dataset.get_batch(indices))], dataset))


def test_empty_sequences_of_ragged_and_listed_arrays_are_found_in_the_whole_dataset():
    lengths = np.array([3, 2, 4, 1] + [0] + [2] * 20 + [0] * 10)
    offsets = np.concatenate([[0], np.cumsum(lengths)])
    ragged = {"values": np.concatenate(_sequences(lengths)), "offsets": offsets}
    for data in (ragged, _sequences(lengths)):
        (finding,) = _findings(NumpyDataset({"data": data}))
        assert finding.severity == "warning"
        assert finding.message.startswith(
            "dataset 'train' (NumpyDataset) key 'data': 11 of 35 sequences are empty (length 0), at sequence "
            "indices 4, 25, 26, 27, 28, 29, 30, 31, ..."
        )


class _Streamed(Dataset):
    """Sequences one by one: their lengths are unknown until read, so only the sample is checked."""

    def __init__(self, lengths):
        super().__init__()
        self.lengths = lengths

    @property
    def num_seqs(self):
        return len(self.lengths)

    def key_info(self):
        return {"data": {"shape": (None, 4), "dtype": "float32"}}

    def get_seq(self, index):
        return {"data": _sequences([self.lengths[index]])[0] + index}


def test_a_streamed_dataset_is_checked_on_the_sample():
    (finding,) = _findings(_Streamed([2, 0, 3, 1, 0]))
    assert finding.severity == "warning"
    assert "key 'data': 1 of 4 sequences in the first 1 batches is empty (length 0), at sequence index 1." in (
        finding.message
    )


def test_all_sequences_empty_stops_training_and_healthy_data_is_quiet():
    (finding,) = _findings(NumpyDataset({"data": _sequences([0] * 8)}))
    assert finding.severe and "all 8 sequences are empty (length 0): there is nothing to train on" in finding.message
    assert _findings(NumpyDataset({"data": _sequences([1, 2, 3, 4, 5])})) == []
    fixed = NumpyDataset({"data": np.stack(_sequences([4] * 8))[:, 0]})
    assert _findings(fixed, key=DataKey("data", (4,), "float32")) == []


def _label_batches(labels: np.ndarray, size: int) -> Sample:
    return Sample([(np.arange(i, i + size), {"classes": labels[i : i + size]}) for i in range(0, 4 * size, size)])


def test_train_batches_ordered_by_their_label_are_a_warning_and_shuffled_or_imbalanced_ones_are_not():
    """Issue 49: the order of independent examples. Data stored sorted by class and read in that order gives batches
    of one class; the same labels shuffled, or a label that is one class almost everywhere, are not judged."""
    from framework.check_library.data_checks import order_findings

    key = DataKey("classes", (), "int64", sparse_dim=4)
    rng = np.random.default_rng(0)
    ordered = np.sort(rng.integers(0, 4, 2000))
    counts = np.bincount(ordered, minlength=4)
    (finding,) = order_findings(key, _label_batches(ordered, 16), counts)
    assert finding.severity == "warning" and "train batches arrive ordered by 'classes'" in finding.message
    assert finding.evidence["classes_per_batch"] == [1, 1, 1, 1] and "seq_ordering 'random'" in finding.fix
    shuffled = rng.permutation(ordered)
    assert order_findings(key, _label_batches(shuffled, 16), counts) == []
    rare = np.where(rng.random(2000) < 0.02, 1, 0)  # one class almost everywhere: its order tells nothing
    assert order_findings(key, _label_batches(np.sort(rare), 16), np.bincount(rare, minlength=4)) == []


def _adjacencies(one_way: bool) -> NumpyDataset:
    rng = np.random.default_rng(0)
    upper = np.triu(rng.random((8, 6, 6)) < 0.4, 1).astype(np.float32)
    return NumpyDataset({"adjacency": upper if one_way else upper + upper.transpose(0, 2, 1)})


def test_square_matrices_with_one_triangle_empty_are_named_as_one_way():
    key = DataKey("adjacency", (6, 6), "float32")
    (finding,) = [f for f in _findings(_adjacencies(True), key=key) if "constant" in f.message]
    assert finding.severity == "warning"
    assert "They include all 15 entries below the diagonal of its [6, 6] matrices, all 0" in finding.message
    assert "every edge is stored one way" in finding.message and "Are they filled in?" not in finding.message
    assert not [f for f in _findings(_adjacencies(False), key=key) if "one way" in f.message]
