"""RETURNN's datasets as RETURNN configs write them, on data in RETURNN's formats made here.

Each is compared with what RETURNN's own dataset class (a test-only dependency, with soundfile, librosa and
sentencepiece) reads from the same files: sequence tags and order, targets, and features (raw samples exactly;
log-mel features within float32 rounding, as both compute the same float64 numbers in a different summation
order and round them to float32).
"""

from __future__ import annotations

import io
import multiprocessing
import os
import pickle
import zipfile

import numpy as np
import pytest

from conftest import captured_log, run_rnn, write_config
from framework.base.errors import ConfigError, DataError
from framework.datasets import MetaDataset, OggZipDataset, base, init_dataset
from framework.datasets.hdf import write_hdf
from framework.datasets.vocabulary import BytePairEncoding

soundfile = pytest.importorskip("soundfile")

RATE = 16000
UTTERANCES = [  # (tag, text, seconds)
    ("corpus/1", "the cat sat", 0.50),
    ("corpus/2", "a hat", 0.30),
    ("corpus/3", "the bat sat on a mat", 0.80),
    ("corpus/4", "cats and hats", 0.42),
    ("corpus/5", "the end", 0.25),
]
WORDS = ["<unk>", "the", "cat", "sat", "a", "hat", "bat", "on", "mat", "and", "end"]


def make_ogg_zip(path: str, utterances=UTTERANCES) -> str:
    """An ogg zip as RETURNN's tools write it: ``<name>.txt`` (a literal list of dicts) and ``<name>/*.ogg``."""
    name = os.path.splitext(os.path.basename(path))[0]
    entries = []
    with zipfile.ZipFile(path, "w") as f:
        for i, (tag, text, seconds) in enumerate(utterances):
            t = np.arange(int(seconds * RATE)) / RATE
            noise = np.random.default_rng(i).standard_normal(len(t))
            samples = 0.3 * np.sin(2 * np.pi * (180 + 60 * i) * t) + 0.02 * noise
            encoded = io.BytesIO()
            soundfile.write(encoded, samples, RATE, format="OGG", subtype="VORBIS")
            f.writestr(f"{name}/{i}.ogg", encoded.getvalue())
            entries.append({"file": f"{i}.ogg", "seq_name": tag, "text": text, "duration": seconds})
        f.writestr(f"{name}.txt", repr(entries))
    return path


@pytest.fixture
def corpus(tmp_path) -> dict[str, str]:
    """Paths of an ogg zip and a word vocabulary."""
    vocab = tmp_path / "words.txt"
    vocab.write_text("\n".join(WORDS) + "\n")
    return {"zip": make_ogg_zip(str(tmp_path / "corpus.zip")), "vocab": str(vocab)}


def returnn_epoch(spec: dict, epoch: int = 1) -> list[tuple[str, dict[str, np.ndarray]]]:
    """(tag, {key: data}) of each sequence of ``epoch`` in the order RETURNN's dataset of ``spec`` gives them."""
    from returnn.datasets.basic import init_dataset as returnn_init_dataset

    dataset = returnn_init_dataset(dict(spec))
    dataset.init_seq_order(epoch=epoch)
    seqs, i = [], 0
    while dataset.is_less_than_num_seqs(i):
        dataset.load_seqs(i, i + 1)
        seqs.append((dataset.get_tag(i), {k: dataset.get_data(i, k) for k in dataset.get_data_keys() if k != "raw"}))
        i += 1
    return seqs


def our_epoch(spec: dict, epoch: int = 1) -> list[tuple[str, dict[str, np.ndarray]]]:
    """The same for this framework's dataset of ``spec`` (as an evaluation dataset: its own ordering)."""
    dataset = init_dataset(dict(spec), option="dev", random_seed=1)
    order = dataset.get_seq_order(epoch)
    dataset.use_epoch(epoch)
    return [(dataset.seq_tag(int(i)), dataset.get_seq(int(i))) for i in order]


def assert_same(ours, theirs, atol: float = 0.0) -> float:
    """Tags, keys and values equal (features within ``atol``); return the largest absolute difference."""
    assert [tag for tag, _ in ours] == [tag for tag, _ in theirs]
    worst = 0.0
    for (tag, mine), (_, other) in zip(ours, theirs, strict=True):
        assert sorted(mine) == sorted(other), tag
        for key in mine:
            assert mine[key].shape == other[key].shape and mine[key].dtype == other[key].dtype, (tag, key)
            diff = float(np.abs(mine[key].astype(np.float64) - other[key]).max(initial=0.0))
            assert diff <= atol, (tag, key, diff)
            worst = max(worst, diff)
    return worst


def test_ogg_zip_raw_audio_and_words_equal_returnns_in_its_orderings(corpus):
    spec = {
        "class": "OggZipDataset",
        "path": corpus["zip"],
        "audio": {"features": "raw", "sample_rate": RATE},
        "targets": {"vocab_file": corpus["vocab"], "unknown_label": "<unk>"},
    }
    ours = our_epoch(spec)
    assert [tag for tag, _ in ours] == [tag for tag, _, _ in UTTERANCES]
    assert ours[3][1]["classes"].tolist() == [0, 9, 0]  # "cats" and "hats" are unknown words
    assert bytes(ours[1][1]["orth"]) == b"a hat"
    assert assert_same(ours, returnn_epoch(spec)) == 0.0
    for ordering, partition_epoch in (("sorted", 1), ("sorted_reverse", 2)):  # RETURNN sorts by the durations
        ordered = {**spec, "seq_ordering": ordering, "partition_epoch": partition_epoch}
        for epoch in range(1, partition_epoch + 1):
            assert_same(our_epoch(ordered, epoch), returnn_epoch(ordered, epoch))
    dataset = OggZipDataset(corpus["zip"], audio={"features": "raw"})
    frames = [len(dataset.get_seq(i)["data"]) for i in range(dataset.num_seqs)]
    assert list(dataset.seq_lengths()) == frames  # the batch plan's lengths: what the durations give


@pytest.mark.slow  # RETURNN's librosa and scipy.signal import for 5-20 s on a busy machine
@pytest.mark.parametrize(
    "audio",
    [
        {"features": "log_mel_filterbank", "num_feature_filters": 40},
        {
            "features": "log_mel_filterbank",
            "num_feature_filters": 80,
            "window_len": 0.032,
            "step_len": 0.0125,
            "peak_normalization": False,
            "preemphasis": 0.97,
        },
        {"features": "log_mel_filterbank", "norm_mean": "per_seq", "norm_std_dev": "per_seq", "join_frames": 3},
        {},  # RETURNN's default: 40 MFCCs, the first the frame's energy
        {"features": "mfcc", "num_feature_filters": 13, "window_len": 0.032, "peak_normalization": False},
    ],
)
def test_ogg_zip_log_mel_and_mfcc_features_equal_returnns_librosa_features(corpus, audio):
    pytest.importorskip("librosa")
    spec = {"class": "OggZipDataset", "path": corpus["zip"], "audio": audio, "targets": None}
    ours = our_epoch(spec)
    # Both compute the same float64 filterbank energies (numpy here, librosa there), possibly summed in another
    # order (BLAS); rounded to float32 they may differ by one float32 step: < 1e-5 for |x| < 128 (MFCCs reach ~90).
    worst = assert_same(ours, returnn_epoch(spec), atol=1e-5)
    frames, join = 1 + int(0.5 * RATE) // int(audio.get("step_len", 0.01) * RATE), audio.get("join_frames", 1)
    assert ours[0][1]["data"].shape == (-(-frames // join), audio.get("num_feature_filters", 40) * join)
    print(f"{audio}: max abs diff to RETURNN {worst:.2e}")


def test_bpe_and_sentencepiece_targets_equal_returnns(tmp_path, corpus):
    codes = tmp_path / "bpe.codes"  # subword-nmt's format; merges that make words and pieces missing from the vocab
    codes.write_text(
        "#version: 0.2\nt h\na t</w>\nth e</w>\nc at</w>\nh at</w>\ns at</w>\na n\nan d</w>\nb at</w>\ne n\n"
    )
    vocab = tmp_path / "bpe.vocab"  # RETURNN's dict literal; "bat" and "h@@" are left out, so they are split back
    labels = "<unk> the cat sat hat at a c@@ s@@ b@@ t h e n d a@@ th@@ t@@ and o@@ n@@ m@@ e@@ s".split()
    vocab.write_text(repr({label: i for i, label in enumerate(labels)}))
    targets = {"class": "BytePairEncoding", "bpe_file": str(codes), "vocab_file": str(vocab), "unknown_label": "<unk>"}
    from returnn.datasets.util.vocabulary import Vocabulary as ReturnnVocabulary

    theirs, ours = (
        ReturnnVocabulary.create_vocab(**targets),
        BytePairEncoding(**{k: v for k, v in targets.items() if k != "class"}),
    )
    rng = np.random.default_rng(0)
    letters = list("thecasbndo")
    sentences = [" ".join("".join(rng.choice(letters, rng.integers(1, 6))) for _ in range(4)) for _ in range(300)]
    sentences += [text for _, text, _ in UTTERANCES]
    for sentence in sentences:
        assert ours.get_seq(sentence) == theirs.get_seq(sentence), sentence
    assert ours.codes.segment("bat cats") == ["b@@", "at", "c@@", "a@@", "t@@", "s"]  # "bat" is not in the vocab
    assert ours.get_seq("bat cats xy") == [9, 5, 7, 15, 17, 23, 0, 0]  # "x@@" and "y": unknown

    spm = pytest.importorskip("sentencepiece")
    (tmp_path / "text.txt").write_text("\n".join(text for _, text, _ in UTTERANCES * 10))
    spm.SentencePieceTrainer.train(
        input=str(tmp_path / "text.txt"), model_prefix=str(tmp_path / "sp"), vocab_size=20, minloglevel=2
    )
    for options in ({"class": "SentencePieces", "model_file": str(tmp_path / "sp.model")}, targets):
        spec = {"class": "OggZipDataset", "path": corpus["zip"], "audio": None, "targets": options}
        assert_same(our_epoch(spec), returnn_epoch(spec))


def test_a_vocab_with_several_labels_on_one_id_reads_as_returnns(tmp_path):
    """i6_core writes vocabularies with several special symbols on one id ("<s>" and "</s>" both 0)."""
    from returnn.datasets.util.vocabulary import Vocabulary as ReturnnVocabulary

    from framework.datasets.vocabulary import Vocabulary

    path = tmp_path / "vocab.txt"
    path.write_text(repr({"<s>": 0, "</s>": 0, "<unk>": 1, "<blank>": 1, "the": 2, "cat": 3, "sat": 4}))
    ours = Vocabulary(str(path), unknown_label="<unk>", seq_postfix=[0])
    theirs = ReturnnVocabulary(str(path), unknown_label="<unk>", seq_postfix=[0])
    assert (
        (ours.num_labels, ours.labels)
        == (theirs.num_labels, theirs.labels)
        == (5, ["<s>", "<unk>", "the", "cat", "sat"])
    )
    for text in ("the cat sat", "<s> the dog </s>", "<blank> cat"):
        assert ours.get_seq(text) == theirs.get_seq(text), text
    path.write_text(repr({"<s>": 0, "</s>": 0, "the": 2}))  # id 1 unused: RETURNN refuses it too
    with pytest.raises(ConfigError, match=r"ids 0 \.\. N-1, each at least once .*unused: \[1\]"):
        Vocabulary(str(path), unknown_label=None)


def test_ogg_zip_segment_file_and_fixed_random_subset_pick_returnns_sequences(tmp_path, corpus):
    segments = tmp_path / "segments"
    segments.write_text("corpus/2\ncorpus/3\ncorpus/5\n")
    for extra in ({"segment_file": str(segments)}, {"fixed_random_subset": 3}, {"fixed_random_subset": 0.5}):
        spec = {"class": "OggZipDataset", "path": [corpus["zip"]], "audio": None, "targets": None, **extra}
        ours = our_epoch(spec)
        assert_same(ours, returnn_epoch(spec))
        assert len(ours) in (2, 3)


def test_meta_dataset_matches_sequences_by_tag_as_returnn_does(tmp_path, corpus, monkeypatch):
    rng = np.random.default_rng(1)
    order = [4, 2, 0, 3, 1]  # the HDF file holds the sequences in another order than the zip
    frames = {i: 3 + i for i in order}
    alignments = [rng.integers(0, 7, size=frames[i]).astype(np.int32) for i in order]
    hdf = str(tmp_path / "align.hdf")
    write_hdf(hdf, {"data": alignments}, [UTTERANCES[i][0] for i in order], main="data", sparse_dims={"data": 7})
    spec = {
        "class": "MetaDataset",
        "datasets": {
            "zip": {
                "class": "OggZipDataset",
                "path": corpus["zip"],
                "audio": {"features": "raw"},
                "targets": {"vocab_file": corpus["vocab"], "unknown_label": "<unk>"},
                "seq_ordering": "sorted_reverse",
                "partition_epoch": 2,
            },
            "align": {"class": "HDFDataset", "files": [hdf], "use_cache_manager": True},
        },
        "data_map": {"audio": ("zip", "data"), "bpe": ("zip", "classes"), "align": ("align", "data")},
        "seq_order_control_dataset": "zip",
    }
    monkeypatch.setattr(base, "_noted", set())  # the note is said once per process
    for epoch in (1, 2):
        with captured_log(3) as lines:
            ours = our_epoch(spec, epoch)
        assert sum("HDFDataset: use_cache_manager=True: there is no cache manager" in line for line in lines) == (
            epoch == 1
        )
        assert_same(ours, returnn_epoch(spec, epoch))
        for tag, seq in ours:  # each alignment is the one stored under the same tag
            np.testing.assert_array_equal(seq["align"], alignments[order.index(int(tag.split("/")[1]) - 1)])
    meta = init_dataset(spec, option="train", random_seed=1)
    batch = meta.get_batch(np.array([0, 3]))
    assert list(batch["align:seq_len"]) == [3, 6] and batch["audio"].shape == (2, int(0.5 * RATE), 1)

    missing = {**spec, "datasets": {**spec["datasets"], "align": {"class": "HDFDataset", "files": [hdf]}}}
    write_hdf(hdf, {"data": alignments[:4]}, [UTTERANCES[i][0] for i in order[:4]], main="data")
    with pytest.raises(ConfigError, match="no sequence tagged 'corpus/2'"):
        MetaDataset(**{k: v for k, v in missing.items() if k != "class"})


def test_meta_dataset_without_control_dataset_and_with_seq_list_files_as_returnn(tmp_path, corpus):
    rng = np.random.default_rng(3)
    features = [rng.standard_normal((int(rng.integers(2, 9)), 2)).astype(np.float32) for _ in UTTERANCES]
    hdf = str(tmp_path / "feat.hdf")  # its own tags: "feat/<n>"
    write_hdf(hdf, {"data": features}, [f"feat/{i + 1}" for i in range(len(UTTERANCES))], main="data")
    zip_spec = {"class": "OggZipDataset", "path": corpus["zip"], "audio": None, "targets": None}
    pairs = [(f"feat/{n}", f"corpus/{n}") for n in (4, 1, 3)]  # three sequences, in this order
    seq_lists = tmp_path / "seqs.pkl"
    seq_lists.write_bytes(pickle.dumps({"feat": [a for a, _ in pairs], "zip": [b for _, b in pairs]}))
    spec = {
        "class": "MetaDataset",
        "datasets": {"feat": {"class": "HDFDataset", "files": [hdf]}, "zip": zip_spec},
        "data_map": {"data": ("feat", "data"), "orth": ("zip", "orth")},
        "seq_list_file": str(seq_lists),
        "seq_ordering": "default",
    }
    ours = our_epoch(spec)
    assert [tag for tag, _ in ours] == ["feat/4", "feat/1", "feat/3"]
    assert bytes(ours[0][1]["orth"]) == UTTERANCES[3][1].encode()
    assert_same(ours, returnn_epoch(spec))
    same_tags = tmp_path / "tags.txt"
    same_tags.write_text("corpus/5\ncorpus/2\n")
    text_only = {
        **spec,
        "datasets": {"zip": zip_spec},
        "data_map": {"data": ("zip", "orth")},
        "seq_list_file": str(same_tags),
    }
    assert [tag for tag, _ in our_epoch(text_only)] == ["corpus/5", "corpus/2"]
    assert_same(our_epoch(text_only), returnn_epoch(text_only))
    # Without a control dataset, MetaDataset's own ordering sorts by the lengths of data_map["data"]'s dataset.
    ordered = {**spec, "seq_list_file": None, "seq_ordering": "sorted_reverse", "partition_epoch": 2}
    ordered["datasets"] = {"feat": {"class": "HDFDataset", "files": [hdf]}}
    ordered["data_map"] = {"data": ("feat", "data")}
    for epoch in (1, 2):
        assert_same(our_epoch(ordered, epoch), returnn_epoch(ordered, epoch))


def test_multi_proc_dataset_reads_in_workers_the_wrapped_datasets_sequences_in_its_order(tmp_path, corpus):
    inner = {
        "class": "OggZipDataset",
        "path": corpus["zip"],
        "audio": {"features": "log_mel_filterbank"},
        "targets": {"vocab_file": corpus["vocab"], "unknown_label": "<unk>"},
    }
    spec = {
        "class": "MultiProcDataset",
        "dataset": inner,
        "num_workers": 2,
        "buffer_size": 2,
        "partition_epoch": 2,
        "seq_ordering": "laplace:.2",
    }
    wrapped = init_dataset(spec, option="train", random_seed=3)
    plain = init_dataset({**inner, "partition_epoch": 2, "seq_ordering": "laplace:.2"}, option="train", random_seed=3)
    for epoch in (1, 2, 3):
        order = wrapped.get_seq_order(epoch)
        np.testing.assert_array_equal(order, plain.get_seq_order(epoch))
        wrapped.use_epoch(epoch)
        batch, expected = wrapped.get_batch(order), plain.get_batch(order)
        assert sorted(batch) == sorted(expected)
        for key in batch:
            np.testing.assert_array_equal(batch[key], expected[key])
    workers = [process for process, _ in wrapped._workers]
    assert len(workers) == 2 and all(p.is_alive() and p.pid != os.getpid() for p in workers)
    wrapped._stop()
    assert not any(p.is_alive() for p in workers)

    # In a daemonic process (a DataLoader worker of torch_dataloader_opts), which may not have children: read there.
    context = multiprocessing.get_context("fork")
    here, there = context.Pipe()
    reader = context.Process(target=_send_batch, args=(wrapped, order, there), daemon=True)
    reader.start()
    batch, worker_count = here.recv()
    reader.join()
    assert worker_count == 0
    np.testing.assert_array_equal(batch["data"], plain.get_batch(order)["data"])


def _send_batch(dataset, indices, conn) -> None:
    batch = dataset.get_batch(indices)
    conn.send((batch, len(dataset._workers)))


def test_multi_proc_dataset_wraps_distribute_files_and_raises_a_workers_exception_here(tmp_path):
    rng = np.random.default_rng(2)
    files = []
    for f in range(4):
        files.append(str(tmp_path / f"part{f}.hdf"))
        features = [rng.standard_normal((int(rng.integers(2, 9)), 3)).astype(np.float32) for _ in range(3)]
        write_hdf(files[-1], {"data": features}, [f"part{f}/{i}" for i in range(3)], main="data")
    inner = {
        "class": "DistributeFilesDataset",
        "files": files,
        "partition_epoch": 2,
        "get_sub_epoch_dataset": lambda parts: {"class": "HDFDataset", "files": parts, "seq_ordering": "random"},
    }
    wrapped = init_dataset(
        {"class": "MultiProcDataset", "dataset": inner, "num_workers": 2, "buffer_size": 1},
        option="train",
        random_seed=5,
    )
    plain = init_dataset(inner, option="train", random_seed=5)
    for epoch in (1, 2, 3):
        order = wrapped.get_seq_order(epoch)
        np.testing.assert_array_equal(order, plain.get_seq_order(epoch))
        wrapped.use_epoch(epoch)
        plain.use_epoch(epoch)
        assert [wrapped.seq_tag(int(i)) for i in order] == [plain.seq_tag(int(i)) for i in order]
        np.testing.assert_array_equal(wrapped.get_batch(order)["data"], plain.get_batch(order)["data"])
    wrapped._stop()

    broken = str(tmp_path / "broken.zip")
    with zipfile.ZipFile(broken, "w") as f:  # an index that lists a file the zip lacks
        f.writestr("broken.txt", repr([{"file": "gone.ogg", "seq_name": "x", "text": "a", "duration": 0.1}]))
    spec = {
        "class": "MultiProcDataset",
        "num_workers": 1,
        "buffer_size": 1,
        "dataset": {"class": "OggZipDataset", "path": broken, "audio": {"features": "raw"}},
    }
    dataset = init_dataset(spec, option="dev", random_seed=1)
    with pytest.raises(DataError, match="has no 'broken/gone.ogg'") as raised:
        dataset.get_batch(np.array([0]))
    assert "raised in a worker of MultiProcDataset" in "".join(raised.value.__notes__)
    dataset._stop()


def test_ogg_zip_refuses_what_it_cannot_do_with_a_way_forward(corpus):
    with pytest.raises(ConfigError, match="'db_mel_filterbank' are not supported.*dump"):
        OggZipDataset(corpus["zip"], audio={"features": "db_mel_filterbank"})
    with pytest.raises(ConfigError, match="with_delta"):
        OggZipDataset(corpus["zip"], audio={"features": "log_mel_filterbank", "with_delta": True})
    with pytest.raises(ConfigError, match="unknown_label = 'UNK' is not in the vocabulary"):
        OggZipDataset(corpus["zip"], audio=None, targets={"vocab_file": corpus["vocab"]})
    with zipfile.ZipFile(corpus["zip"]) as f:
        member = f.getinfo("corpus/1.ogg")
    with open(corpus["zip"], "r+b") as f:  # one flipped byte inside the stored audio of "corpus/2"
        f.seek(member.header_offset + 30 + len(member.filename) + len(member.extra) + 100)
        byte = f.read(1)
        f.seek(-1, os.SEEK_CUR)
        f.write(bytes([byte[0] ^ 0xFF]))
    dataset = OggZipDataset(corpus["zip"], audio={"features": "raw"})
    with pytest.raises(DataError, match="'corpus/1.ogg' in .*corpus.zip cannot be read .*Bad CRC-32.* damaged"):
        dataset.get_seq(1)


def test_rasr_datasets_are_refused_with_a_way_forward():
    for name in ("ExternSprintDataset", "SprintCacheDataset"):
        with pytest.raises(ConfigError, match=f"{name} needs RASR.*HDFDataset"):
            init_dataset({"class": name, "sprintTrainerExecPath": "nn-trainer"}, option="train", random_seed=1)


@pytest.mark.slow  # two rnn.py runs
def test_returnn_style_config_trains_on_meta_of_ogg_zip_and_hdf_in_workers_and_refuses_rasr(tmp_path, corpus):
    hdf = str(tmp_path / "speaker.hdf")
    write_hdf(
        hdf,
        {"data": [np.full((1,), i % 2, dtype=np.int32) for i in range(5)]},
        [tag for tag, _, _ in UTTERANCES],
        main="data",
        sparse_dims={"data": 2},
    )
    config = write_config(
        tmp_path,
        f"""
import torch
from torch import nn
train = {{"class": "MultiProcDataset", "num_workers": 2, "buffer_size": 5, "dataset": {{
    "class": "MetaDataset", "seq_order_control_dataset": "zip",
    "datasets": {{
        "zip": {{"class": "OggZipDataset", "path": {corpus["zip"]!r}, "use_cache_manager": True,
                 "audio": {{"features": "log_mel_filterbank", "num_feature_filters": 20}},
                 "targets": None, "partition_epoch": 2, "seq_ordering": "laplace:.2"}},
        "spk": {{"class": "HDFDataset", "files": [{hdf!r}], "use_cache_manager": True}}}},
    "data_map": {{"data": ("zip", "data"), "speaker": ("spk", "data")}}}}}}
extern_data = {{"data": {{"shape": (None, 20), "dtype": "float32"}},
               "speaker": {{"shape": (None,), "dtype": "int64", "sparse_dim": 2}}}}
batch_size = 100
num_epochs = 2
model = {str(tmp_path / "model")!r}

def get_model(**_kwargs):
    return nn.Linear(20, 2)

def train_step(*, model, extern_data, run_ctx, **_kwargs):
    data, lengths = extern_data["data"], extern_data["data:seq_len"].to(extern_data["data"].device)
    real = (torch.arange(data.shape[1], device=data.device)[None, :] < lengths[:, None]).unsqueeze(-1)
    logits = (model(data) * real).sum(dim=1) / lengths[:, None]
    run_ctx.mark_as_loss(name="ce", loss=nn.functional.cross_entropy(logits, extern_data["speaker"][:, 0]))
""",
    )
    run = run_rnn(config, cwd=str(tmp_path))
    assert run.returncode == 0, run.stdout + run.stderr
    assert run.stdout.count("no cache manager here") == 2  # once for each dataset class
    assert "WARNING" not in run.stdout + run.stderr
    assert os.path.exists(tmp_path / "model.002.pt")

    rasr = run_rnn(
        config, "++train", "{'class': 'ExternSprintDataset', 'sprintTrainerExecPath': 'nn-trainer'}", cwd=str(tmp_path)
    )
    assert rasr.returncode == 2
    assert "ExternSprintDataset needs RASR" in rasr.stdout + rasr.stderr
    assert "HDFDataset" in rasr.stdout + rasr.stderr and "Traceback" not in rasr.stdout + rasr.stderr


def test_an_hdf_file_whose_sequence_lengths_exceed_its_data_is_refused_naming_key_and_counts(tmp_path):
    import h5py

    path = str(tmp_path / "short.hdf")
    features = [np.ones((5, 3), dtype=np.float32) for _ in range(5)]
    write_hdf(path, {"data": features}, [f"seq-{i}" for i in range(5)], main="data")
    with h5py.File(path, "r+") as f:  # the data of 2 sequences, the lengths of 5: a truncated or mislabelled file
        inputs = f["inputs"][:10]
        del f["inputs"]
        f.create_dataset("inputs", data=inputs)
    with pytest.raises(DataError) as refused:
        init_dataset({"class": "HDFDataset", "files": [path]}, option="train", random_seed=1)
    assert str(refused.value).startswith(
        f"HDFDataset: {path}: the sequence lengths of key 'data' (seqLengths column 0) add up to 25 frames, but inputs "
        f"holds 10: 3 of its 5 sequences would be read cut short or empty."
    )


def test_a_killed_multiproc_worker_is_named_with_the_signal_that_ended_it(tmp_path):
    import signal

    dataset = init_dataset(
        {
            "class": "MultiProcDataset",
            "num_workers": 2,
            "buffer_size": 1,
            "dataset": {"class": "GaussianClustersDataset", "split": "train", "num_seqs": 20, "dim": 4},
        },
        option="train",
        random_seed=1,
    )
    dataset.use_epoch(1)
    dataset.get_batch(np.array([0, 1]))  # the workers are running
    victim = dataset._workers[0][0]
    os.kill(victim.pid, signal.SIGKILL)  # as the out-of-memory killer does
    victim.join()
    with pytest.raises(DataError) as lost:
        dataset.get_batch(np.array([0, 1, 2, 3]))
    assert f"worker process {victim.pid} (of num_workers = 2) ended without answering: it was killed by SIGKILL" in (
        str(lost.value)
    )
    assert dataset._workers == []  # the others were stopped


@pytest.mark.parametrize(
    "spec, named",
    [
        ({"class": "HDFDataset", "files": ["FIFO"]}, "a file of HDFDataset"),
        ({"class": "NumpyDataset", "arrays": {"data": "FIFO"}}, "an array file of NumpyDataset"),
        ({"class": "OggZipDataset", "path": "FIFO", "audio": {"features": "raw"}}, "a zip file of OggZipDataset"),
    ],
)
def test_a_fifo_given_as_a_dataset_file_is_refused_by_name_without_waiting(tmp_path, spec, named):
    fifo = str(tmp_path / "data.zip")
    os.mkfifo(fifo)  # opening it for reading would wait for a writer forever
    with pytest.raises(ConfigError, match=f"{fifo} \\({named}\\) is a FIFO"):
        init_dataset(_replaced(spec, "FIFO", fifo), option="train", random_seed=1)


def _replaced(value, old, new):
    """``value`` (nested dicts and lists) with each ``old`` replaced by ``new``."""
    if isinstance(value, dict):
        return {key: _replaced(item, old, new) for key, item in value.items()}
    if isinstance(value, list):
        return [_replaced(item, old, new) for item in value]
    return new if value == old else value
