"""Datasets, batching, seq ordering, splits, and label checks."""

import gzip

import numpy as np
import pytest
import torch

from framework.base.errors import ConfigError, DataError
from framework.datasets import (
    GaussianClustersDataset,
    MnistDataset,
    NumpyDataset,
    ObjectPatchesDataset,
    SyntheticRegressionDataset,
    Task12AXDataset,
    init_dataset,
)
from framework.datasets.base import Dataset, collate
from framework.datasets.batching import make_batches
from framework.datasets.extern_data import check_dataset, parse_extern_data
from framework.datasets.loader import BatchLoader
from framework.datasets.task12ax import label_12ax


def test_batches_respect_padded_frame_budget_and_max_seqs():
    lengths = np.array([3, 5, 2, 8, 1, 20, 4])
    order = np.arange(len(lengths))
    batches = make_batches(order, lengths, batch_size=10, max_seqs=3)
    assert sum(len(b) for b in batches) == len(lengths)
    assert np.array_equal(np.concatenate(batches), order)
    for batch in batches:
        assert len(batch) <= 3
        assert len(batch) == 1 or lengths[batch].max() * len(batch) <= 10
    assert [list(b) for b in batches if 5 in b] == [[5]]  # longer than the budget: alone


def test_fixed_shape_data_batches_count_entries():
    batches = make_batches(np.arange(10), np.ones(10, dtype=np.int64), batch_size=4, max_seqs=None)
    assert [len(b) for b in batches] == [4, 4, 2]


def test_variable_length_batches_are_padded_with_seq_len():
    seqs = [np.arange(n) for n in (2, 4, 1)]
    dataset = NumpyDataset({"data": seqs, "classes": np.array([0, 1, 0])})
    batch = dataset.get_batch(np.array([2, 0, 1]))
    assert batch["data"].shape == (3, 4)
    assert batch["data:seq_len"].tolist() == [1, 2, 4]
    assert batch["data"][1].tolist() == [0, 1, 0, 0]
    generic = collate([dataset.get_seq(i) for i in (2, 0, 1)], dataset.key_info())
    for key in batch:
        assert np.array_equal(generic[key], batch[key])


def test_random_seq_order_is_seeded_and_changes_per_epoch():
    make = lambda seed: NumpyDataset({"x": np.zeros((50, 2))}, seq_ordering="random", random_seed=seed)  # noqa: E731
    a, b = make(1), make(1)
    assert np.array_equal(a.get_seq_order(3), b.get_seq_order(3))
    assert not np.array_equal(a.get_seq_order(1), a.get_seq_order(2))
    assert not np.array_equal(a.get_seq_order(1), make(2).get_seq_order(1))
    assert sorted(a.get_seq_order(1)) == list(range(50))


def test_sorted_laplace_and_partition_epoch():
    seqs = [np.zeros(n) for n in np.random.default_rng(0).integers(1, 30, size=40)]
    lengths = np.array([len(s) for s in seqs])
    dataset = NumpyDataset({"x": seqs}, seq_ordering="sorted")
    assert np.all(np.diff(lengths[dataset.get_seq_order(1)]) >= 0)
    for ordering in ("laplace:.10", "laplace:4"):  # RETURNN's: buckets of 10 sequences, or 4 buckets
        dataset = NumpyDataset({"x": seqs}, seq_ordering=ordering, random_seed=3)
        order = dataset.get_seq_order(1)
        assert sorted(order) == list(range(40))
        assert np.all(np.diff(lengths[order[:10]]) >= 0) and np.all(np.diff(lengths[order[10:20]]) <= 0)
        assert not np.all(np.diff(lengths[order]) >= 0)
    dataset = NumpyDataset({"x": seqs}, seq_ordering="random", partition_epoch=3)
    parts = [dataset.get_seq_order(e) for e in (1, 2, 3)]
    assert sorted(np.concatenate(parts)) == list(range(40))
    with pytest.raises(ConfigError, match="seq_ordering"):
        NumpyDataset({"x": seqs}, seq_ordering="shuffle")


def test_packaged_mnist_digits_are_a_stratified_deterministic_split():
    train, test = MnistDataset("train"), MnistDataset("test")
    assert (train.num_seqs, test.num_seqs) == (4000, 1000)
    assert train.key_info()["data"] == {"shape": (784,), "dtype": "float32", "sparse_dim": None}
    assert 0.0 <= train.arrays["data"].min() and train.arrays["data"].max() <= 1.0
    assert np.bincount(test.arrays["classes"], minlength=10).min() >= 80  # every class in both splits
    train_rows = {row.tobytes() for row in train.arrays["data"]}
    assert not any(row.tobytes() in train_rows for row in test.arrays["data"])
    assert np.array_equal(MnistDataset("test").arrays["classes"], test.arrays["classes"])
    assert MnistDataset("test", normalize=False).arrays["data"].max() == 255.0
    assert np.any(test.arrays["classes"][:50] != test.arrays["classes"][0])  # not sorted by class


def _write_idx(path, array, magic_dims):
    header = bytes([0, 0, 8, magic_dims]) + b"".join(int(d).to_bytes(4, "big") for d in array.shape)
    with gzip.open(path, "wb") as f:
        f.write(header + array.astype(np.uint8).tobytes())


def test_mnist_reads_idx_files(tmp_path):
    images = np.random.default_rng(0).integers(0, 256, size=(5, 28, 28))
    labels = np.array([3, 1, 4, 1, 5])
    _write_idx(tmp_path / "t10k-images-idx3-ubyte.gz", images, 3)
    _write_idx(tmp_path / "t10k-labels-idx1-ubyte.gz", labels, 1)
    dataset = MnistDataset("test", path=str(tmp_path), normalize=False)
    assert dataset.arrays["classes"].tolist() == labels.tolist()
    assert np.array_equal(dataset.arrays["data"][2], images[2].reshape(784))
    with pytest.raises(ConfigError, match="no train-images-idx3-ubyte"):
        MnistDataset("train", path=str(tmp_path))
    with pytest.raises(ConfigError, match="not a directory"):
        MnistDataset("train", path=str(tmp_path / "missing"))


def test_12ax_labels_follow_the_rule():
    assert label_12ax("1AXBY2BYAX").tolist() == [0, 0, 1, 0, 0, 0, 0, 1, 0, 0]
    assert label_12ax("1A3X").tolist() == [0, 0, 0, 0]  # X must follow A directly
    dataset = Task12AXDataset(num_seqs=50, min_len=5, max_len=20)
    lengths = dataset.seq_lengths()
    assert lengths.min() >= 5 and lengths.max() <= 20 and len(set(lengths)) > 3
    for i in range(50):
        seq = dataset.get_seq(i)
        assert np.array_equal(seq["classes"], label_12ax("".join("123ABCXYZ"[s] for s in seq["data"])))
    assert sum(dataset.get_seq(i)["classes"].sum() for i in range(50)) > 20


def test_regression_gap_split_tests_outside_the_training_range():
    train = SyntheticRegressionDataset("train", split_mode="gap")
    test = SyntheticRegressionDataset("test", split_mode="gap")
    x_train, x_test = train.arrays["data"][:, 0], test.arrays["data"][:, 0]
    assert len(x_train) == 800 and len(x_test) == 200
    assert np.all((x_test < x_train.min()) | (x_test > x_train.max()))
    y = train.arrays["targets"][:, 0]
    assert np.abs(y - np.sin(8 * (x_train - 1.2))).max() < 0.06


def test_gaussian_clusters_balanced_and_imbalanced():
    balanced = GaussianClustersDataset("all", num_seqs=3000, num_classes=3)
    counts = np.bincount(balanced.arrays["classes"])
    assert counts.min() > 900
    imbalanced = GaussianClustersDataset("all", num_seqs=3000, num_classes=3, class_weights=[0.9, 0.05, 0.05])
    assert np.bincount(imbalanced.arrays["classes"])[0] > 2500
    with pytest.raises(ConfigError, match="class_weights"):
        GaussianClustersDataset(class_weights=[1.0])


def test_object_patches_boxes_match_the_pixels():
    dataset = ObjectPatchesDataset("all", num_seqs=20, size=16, num_classes=2)
    for i in range(20):
        patch, box, label = dataset.arrays["data"][i], dataset.arrays["boxes"][i] * 16, dataset.arrays["classes"][i]
        x0, y0, x1, y1 = box.round().astype(int)
        assert np.all(patch[y0:y1, x0:x1] == (label + 1) / 2) and patch.sum() == pytest.approx(
            (x1 - x0) * (y1 - y0) * (label + 1) / 2
        )


def test_init_dataset_resolves_names_paths_and_callables_with_clear_errors():
    ds = init_dataset(
        {"class": "framework.datasets.GaussianClustersDataset", "num_seqs": 10}, option="dev", random_seed=1
    )
    assert ds.num_seqs == 8 and ds.seq_ordering == "default"
    ds = init_dataset(lambda: NumpyDataset({"x": np.zeros((3, 1))}), option="train", random_seed=1)
    assert ds.seq_ordering == "random"
    with pytest.raises(ConfigError, match="Did you mean 'MnistDataset'"):
        init_dataset({"class": "MnistDatset"}, option="train", random_seed=1)
    with pytest.raises(ConfigError, match="has no parameter 'splt'. Did you mean 'split'"):
        init_dataset({"class": "MnistDataset", "splt": "train"}, option="train", random_seed=1)
    with pytest.raises(ConfigError, match="cannot import module"):
        init_dataset({"class": "no_such_module.Dataset"}, option="train", random_seed=1)


def test_labels_outside_sparse_dim_are_named_before_training():
    labels = np.array([0, 1, 2, 7, 1])
    dataset = NumpyDataset({"data": np.zeros((5, 2), dtype=np.float32), "classes": labels})
    extern = parse_extern_data({"data": {"shape": (2,)}, "classes": {"shape": (), "sparse_dim": 3}})
    with pytest.raises(DataError) as info:
        check_dataset(extern, dataset, "train")
    assert "'classes'" in str(info.value) and "value 7" in str(info.value) and "sequence index 3" in str(info.value)


class _StreamedDataset(Dataset):
    """A dataset that can only be read sequence by sequence (no up-front scan)."""

    num_seqs = 6

    def key_info(self):
        return {"classes": {"shape": (None,), "dtype": "int64", "sparse_dim": None}}

    def get_seq(self, index):
        return {"classes": np.array([0, 1, 5 if index == 4 else 1])}


def test_labels_outside_sparse_dim_are_named_per_batch_for_streamed_data():
    import torch

    extern = parse_extern_data({"classes": {"shape": (None,), "sparse_dim": 3}})
    loader = BatchLoader(
        _StreamedDataset(seq_ordering="default"),
        extern,
        option="train",
        batch_size=100,
        max_seqs=None,
        device=torch.device("cpu"),
    )
    with pytest.raises(DataError, match="value 5 at sequence index 4"):
        list(loader.iterate(loader.plan(1)))


class _ShiftedLabels(NumpyDataset):
    """A NumpyDataset whose get_batch changes what it stores: its stored labels say nothing about its batches."""

    def get_batch(self, indices):
        batch = super().get_batch(indices)
        return {**batch, "classes": batch["classes"] + 1}


def test_labels_scanned_at_startup_are_not_checked_again_per_batch_unless_get_batch_changes_them():
    arrays = {"data": np.zeros((6, 2), dtype=np.float32), "classes": np.array([0, 1, 2, 0, 1, 2])}
    extern = parse_extern_data({"data": {"shape": (2,)}, "classes": {"shape": (), "sparse_dim": 3}})
    assert check_dataset(extern, NumpyDataset(arrays), "train") == {"classes"}
    shifted = _ShiftedLabels(arrays, seq_ordering="default")
    assert check_dataset(extern, shifted, "train") == set()  # the stored labels are fine, the delivered are not
    loader = BatchLoader(shifted, extern, option="train", batch_size=100, max_seqs=None, device=torch.device("cpu"))
    with pytest.raises(DataError, match="value 3 at sequence index 2"):
        list(loader.iterate(loader.plan(1)))


def test_extern_data_mismatches_are_explained():
    dataset = MnistDataset("test")
    with pytest.raises(DataError, match=r"declares shape \(28, 28\)"):
        check_dataset(parse_extern_data({"data": {"shape": (28, 28)}}), dataset, "dev")
    with pytest.raises(DataError, match="has no such key"):
        check_dataset(parse_extern_data({"images": {"shape": (784,)}}), dataset, "dev")
    with pytest.raises(ConfigError, match="unknown entries"):
        parse_extern_data({"data": {"shape": (784,), "dimension": 3}})
    with pytest.raises(ConfigError, match="Tensor-API axis"):
        parse_extern_data({"data": {"shape": (784,), "dims": 3}})
    with pytest.raises(ConfigError, match="last axis"):
        parse_extern_data({"data": {"shape": (None, 40), "dim": 30}})
    with pytest.raises(ConfigError, match="needs 'dim'"):
        parse_extern_data({"classes": {"sparse": True}})
    with pytest.raises(ConfigError, match="sparse_dim"):
        parse_extern_data({"classes": {"shape": (), "dtype": "float32", "sparse_dim": 10}})


def test_dataloader_workers_deliver_the_same_batches():
    import torch

    dataset = Task12AXDataset(num_seqs=30, seq_ordering="random", random_seed=2)
    extern = parse_extern_data(
        {"data": {"shape": (None,), "sparse_dim": 9}, "classes": {"shape": (None,), "sparse_dim": 2}}
    )
    kwargs = dict(option="train", batch_size=60, max_seqs=4, device=torch.device("cpu"))
    plain = BatchLoader(dataset, extern, **kwargs)
    workers = BatchLoader(dataset, extern, dataloader_opts={"num_workers": 2}, **kwargs)
    plan = plain.plan(1)
    for (i1, b1), (i2, b2) in zip(plain.iterate(plan), workers.iterate(plan), strict=True):
        assert np.array_equal(i1, i2)
        assert b1.keys() == b2.keys() and all(torch.equal(b1[k], b2[k]) for k in b1)


def test_returnn_extern_data_notation_and_one_hot_task12ax():
    """RETURNN's {"dim": 9} (dense) and {"dim": 2, "sparse": True} (int32 ids); Task12AX's ids become one-hot."""
    extern = parse_extern_data(
        {"data": {"dim": 9}, "classes": {"dim": 2, "sparse": True}, "feat": {"shape": (None, 3), "dim": 3}}
    )
    assert extern["data"].shape == (None, 9) and extern["data"].dtype == "float32" and extern["data"].sparse_dim is None
    assert (
        extern["classes"].shape == (None,) and extern["classes"].dtype == "int32" and extern["classes"].sparse_dim == 2
    )
    assert extern["feat"].shape == (None, 3)
    del extern["feat"]
    dataset = Task12AXDataset(num_seqs=20, fixed_random_seed=1)
    check_dataset(extern, dataset, "train")
    loader = BatchLoader(dataset, extern, option="train", batch_size=200, max_seqs=4, device=torch.device("cpu"))
    indices, batch = next(loader.iterate(loader.plan(1)))
    data, lengths = batch["data"], batch["data:seq_len"]
    assert data.dtype == torch.float32 and data.shape[-1] == 9 and batch["classes"].dtype == torch.int32
    for row, index in enumerate(indices):
        ids = dataset.get_seq(int(index))["data"]
        assert lengths[row] == len(ids)
        assert torch.equal(data[row, : len(ids)].argmax(-1), torch.from_numpy(ids))
        assert data[row, : len(ids)].sum() == len(ids) and data[row, len(ids) :].sum() == 0  # padding: zero vectors
    assert lengths.device.type == "cpu"


def test_task12ax_fixed_random_seed_is_returnns_and_differs_from_the_run_seed():
    def first(ds):
        return ds.get_seq(0)["data"].tolist()

    assert first(Task12AXDataset(num_seqs=5, fixed_random_seed=1, random_seed=7)) == first(
        Task12AXDataset(num_seqs=5, fixed_random_seed=1, random_seed=8)
    )
    assert first(Task12AXDataset(num_seqs=5, random_seed=1)) != first(Task12AXDataset(num_seqs=5, fixed_random_seed=1))
    assert first(Task12AXDataset(num_seqs=5, random_seed=1)) != first(Task12AXDataset(num_seqs=5, random_seed=2))


def test_char_text_windows_overlap_by_one_byte_and_splits_share_no_file(tmp_path):
    from framework.datasets.text import CharTextDataset, in_dev_split

    for i in range(40):
        (tmp_path / f"f{i:02d}.txt").write_bytes(bytes([65 + i % 26]) * 50)
    pattern = str(tmp_path / "*.txt")
    train, dev = (CharTextDataset(split, files=pattern, dev_fraction=0.3, seq_len=8) for split in ("train", "dev"))
    assert train.files and dev.files and not set(train.files) & set(dev.files)
    assert sorted(train.files + dev.files) == sorted(CharTextDataset("all", files=pattern, seq_len=8).files)
    assert all(in_dev_split(f, 0.3) for f in dev.files)
    windows = train.arrays["data"]
    assert windows.shape[1] == 9 and train.key_info()["data"]["sparse_dim"] == 256
    assert (windows[1:, 0] == windows[:-1, -1]).all()  # each window's first byte is the previous one's target
    stream = b"".join(open(f, "rb").read() for f in train.files)
    assert (
        bytes(windows[0]) == stream[:9]
        and bytes(windows[-1, 1:]) == stream[8 * len(windows) - 7 : 8 * len(windows) + 1]
    )


def test_char_text_reads_the_standard_library_and_explains_missing_files(tmp_path):
    from framework.datasets.text import CharTextDataset

    dev = CharTextDataset("dev", max_chars=10_000)
    assert dev.num_seqs == (10_000 - 1) // 128 and all(f.endswith(".py") and "/test/" not in f for f in dev.files)
    with pytest.raises(ConfigError, match="matches no file"):
        CharTextDataset(files=str(tmp_path / "*.txt"))
    (tmp_path / "a.txt").write_text("short")
    with pytest.raises(ConfigError, match="fewer than one window"):
        CharTextDataset("all", files=str(tmp_path / "*.txt"))


def test_class_counts_of_frames_differ_between_splits_by_chance_not_by_bug():
    from framework.check_library.data_checks import balance_findings

    train = np.array([5000, 3000, 1990, 10])  # class 3 is rare: a dev of 100 should hold 0.1 of it
    dev = np.array([50, 30, 20, 0])
    assert balance_findings("classes", {"train": (train, "train"), "dev": (dev, "dev")}) == []
    dev = np.array([90, 10, 0, 0])  # class 2 should be about 20 of 100: missing it is a finding
    [missing] = balance_findings("classes", {"train": (train, "train"), "dev": (dev, "dev")})
    assert missing.severity == "warning" and "class(es) 2 occur in train" in missing.message
    frames = balance_findings("data", {"train": (train, "train"), "dev": (dev, "dev")}, per_frame=True)
    assert frames and all(f.severity == "note" for f in frames)  # frames of a few sequences are alike


def test_class_ids_wrapped_around_in_8_bits_are_named_and_a_split_by_label_is_not():
    from framework.check_library.data_checks import balance_findings

    rng = np.random.default_rng(0)
    dev = rng.multinomial(3000, np.full(300, 1 / 300))
    true = rng.multinomial(9000, np.full(300, 1 / 300))
    wrapped = np.bincount(np.repeat(np.arange(300), true) % 256, minlength=300)  # train's ids stored as uint8
    [missing] = balance_findings("classes", {"train": (wrapped, "train"), "dev": (dev, "dev")})
    assert "class(es) 256, 257" in missing.message and "occur in dev" in missing.message
    assert "stored in 8 unsigned bits (uint8) somewhere in train's pipeline and wrapped around" in missing.message
    # The same classes missing from train without the doubled low ids: a split by label, no wrap-around claimed
    cut = true.copy()
    cut[256:] = 0
    [missing] = balance_findings("classes", {"train": (cut, "train"), "dev": (dev, "dev")})
    assert "class(es) 256, 257" in missing.message and "wrapped" not in missing.message
