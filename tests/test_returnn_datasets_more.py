"""RETURNN's language-model, synthetic, combining and post-processing datasets, compared with RETURNN's own classes.

Each test writes small files in RETURNN's formats, builds RETURNN's class and ours on them with the same options,
reads one epoch of each and checks the same sequence tags, in the same order, with the same keys, dtypes and values
(max abs difference 0).
"""

from __future__ import annotations

import ast
import gzip
import json
import os
import pickle

import numpy as np
import pytest

from conftest import run_rnn, write_config
from framework.base.errors import ConfigError, DataError
from framework.datasets import init_dataset

pytest.importorskip("returnn")

# Lines of a corpus: brackets, doubled spaces, an empty line, removed chars, trailing spaces, unknown words, and a
# last line without a newline (RETURNN's reader leaves it out).
CORPUS = "the cat sat\nA hat  [noise] on\n\nthe bat (sat) on a mat   \ncats and hats\nthe end\nno newline here"
WORDS = ["[END]", "[UNKNOWN]", "[START]", "the", "cat", "sat", "hat", "on", "a", "mat", "[NOISE]", "end"]


@pytest.fixture
def text(tmp_path) -> dict[str, str]:
    """A plain and a gzipped corpus, a character list, a word map file ('<word> <id>'), a pickled word map."""
    (tmp_path / "corpus.txt").write_text(CORPUS)
    with gzip.open(tmp_path / "more.txt.gz", "wt") as f:
        f.write("  the cat sat  \n\nthe dog\nA mat\n")
    chars = ["[END]", "[UNKNOWN]", "[START]", "[NOISE]", " "] + [chr(c) for c in range(ord("a"), ord("z") + 1)]
    (tmp_path / "chars.txt").write_text("\n".join(chars + ["A", "(", ")"]) + "\n")
    (tmp_path / "words.txt").write_text("".join(f"{w} {i}\n" for i, w in enumerate(WORDS)))
    with open(tmp_path / "words.pkl", "wb") as f:
        pickle.dump({w: i for i, w in enumerate(WORDS)}, f)
    return {
        "txt": str(tmp_path / "corpus.txt"),
        "gz": str(tmp_path / "more.txt.gz"),
        "chars": str(tmp_path / "chars.txt"),
        "words": str(tmp_path / "words.txt"),
        "words_pkl": str(tmp_path / "words.pkl"),
    }


def returnn_epoch(spec: dict, epoch: int = 1, keys: list[str] | None = None) -> list[tuple[str, dict[str, np.ndarray]]]:
    """(tag, {key: data}) of each sequence RETURNN's dataset of ``spec`` gives in ``epoch``, in its order (``keys``:
    those keys, where RETURNN's ``get_data_keys`` does not list all it gives)."""
    from returnn.datasets.basic import get_dataset_class
    from returnn.datasets.basic import init_dataset as returnn_init_dataset

    if "sampling_sizes" in spec:  # RETURNN's init_dataset orders it for epoch None first, which divides by zero
        dataset = get_dataset_class(spec["class"])(**{k: v for k, v in spec.items() if k != "class"})
    else:
        dataset = returnn_init_dataset(dict(spec))
    dataset.init_seq_order(epoch=epoch)
    seqs, i = [], 0
    while dataset.is_less_than_num_seqs(i):
        dataset.load_seqs(i, i + 1)
        if hasattr(dataset, "_get_seq") and dataset._get_seq(i) is None:
            break  # LmDataset announces the epoch's lines, then skips those it cannot parse
        # OggZipDataset's "raw" (the text as a string) is no key here
        names = keys or [k for k in dataset.get_data_keys() if k != "raw"]
        seqs.append((dataset.get_tag(i), {k: dataset.get_data(i, k) for k in names}))
        i += 1
    return seqs


def our_epoch(spec: dict, epoch: int = 1, option: str = "dev") -> list[tuple[str, dict[str, np.ndarray]]]:
    """The same for this framework's dataset of ``spec``."""
    dataset = init_dataset(dict(spec), option=option, random_seed=1)
    order = dataset.get_seq_order(epoch)
    dataset.use_epoch(epoch)
    return [(dataset.seq_tag(int(i)), dataset.get_seq(int(i))) for i in order]


def assert_same(ours, theirs) -> float:
    """Same tags in the same order, same keys, dtypes, shapes and values; return the max abs difference (0)."""
    assert [tag for tag, _ in ours] == [tag for tag, _ in theirs]
    worst = 0.0
    for (tag, mine), (_, other) in zip(ours, theirs, strict=True):
        assert sorted(mine) == sorted(other), tag
        for key in mine:
            assert mine[key].shape == other[key].shape, (tag, key)
            # an empty array of a key the sequence lacks (CombinedDataset) has the key's dtype here, RETURNN's default
            assert mine[key].dtype == other[key].dtype or mine[key].size == 0, (tag, key)
            diff = float(np.abs(mine[key].astype(np.float64) - other[key].astype(np.float64)).max(initial=0.0))
            worst = max(worst, diff)
    assert worst == 0.0
    return worst


def compare(spec: dict, epochs=(1,), keys: list[str] | None = None) -> list[tuple[str, dict[str, np.ndarray]]]:
    """Compare ``spec``'s epochs with RETURNN's; return our first epoch."""
    first = None
    for epoch in epochs:
        ours = our_epoch(spec, epoch)
        assert_same(ours, returnn_epoch(spec, epoch, keys))
        first = first if first is not None else ours
    return first


# -- LmDataset ------------------------------------------------------------------------------------------------------
def test_lm_dataset_characters_with_delayed_data_equal_returnns_in_default_and_sorted_order(text):
    spec = {
        "class": "LmDataset",
        "corpus_file": [text["txt"], text["gz"]],
        "orth_symbols_file": text["chars"],
        "add_delayed_seq_data": True,
    }
    ours = compare(spec)
    assert [tag for tag, _ in ours] == [f"line-{i}" for i in range(8)]  # 5 of the text (no last line), 3 of the gz
    first = ours[0][1]
    assert first["data"].dtype == np.int8 and first["data"][-1] == 0  # 34 symbols: int8; ends with [END]
    assert first["delayed"][0] == 2 and (first["delayed"][1:] == first["data"][:-1]).all()
    for ordering, partition in (("sorted", 1), ("sorted_reverse", 2)):
        compare({**spec, "seq_ordering": ordering, "partition_epoch": partition}, epochs=range(1, partition + 1))


def test_lm_dataset_words_with_unknown_handling_equal_returnns(text):
    base = {"class": "LmDataset", "corpus_file": [text["txt"], text["gz"]], "word_based": True}
    replaced = compare({**base, "orth_symbols_map_file": text["words"], "auto_replace_unknown_symbol": True})
    assert replaced[3][1]["data"].tolist() == [1, 1, 1, 0]  # "cats and hats": three unknown words
    assert replaced[1][1]["data"].tolist() == [1, 6, 10, 7, 0]  # "A" unknown, "[noise]" the special [NOISE]
    skipping = {**base, "orth_symbols_map_file": text["words_pkl"], "error_on_invalid_seq": False}
    kept = compare({**skipping, "seq_ordering": "sorted", "partition_epoch": 2}, epochs=(1, 2))
    assert len(kept) == 2  # sub-epoch 1 has the 4 shortest lines, of which 2 parse
    with pytest.raises(DataError, match="line-1.*'A'.*auto_replace_unknown_symbol"):
        our_epoch({**base, "orth_symbols_map_file": text["words"]})


def test_lm_dataset_word_end_symbol_replace_map_post_process_and_parse_options_equal_returnns(text, tmp_path):
    replace = tmp_path / "replace.json"
    replace.write_text(json.dumps({"x": "ks", "[NOISE]": ""}))
    spec = {
        "class": "LmDataset",
        "corpus_file": text["txt"],
        "orth_symbols_file": text["chars"],
        "word_end_symbol": "[START]",
        "seq_end_symbol": None,
        "auto_replace_unknown_symbol": True,
        "orth_replace_map_file": str(replace),
        "orth_post_process": ["lowercase", "collapse_whitespace"],
        "parse_orth_opts": {"remove_chars": "()t", "prefix": ["[START]"]},
    }
    ours = compare(spec)
    first = ours[0][1]["data"].tolist()
    assert first[0] == 2 and first[-1] == 2 and 0 not in first  # prefix, word end, no [END]
    used = set(np.concatenate([seq["data"] for _, seq in ours]).tolist())
    assert 3 not in used and 5 + ord("t") - ord("a") not in used  # [NOISE] replaced by nothing, "t" removed
    compare({**spec, "orth_post_process": lambda orth: orth.upper(), "orth_replace_map_file": None})


def test_lm_dataset_orth_vocab_bliss_seq_list_and_tag_prefix_equal_returnns(text, tmp_path):
    vocab = tmp_path / "vocab.txt"
    vocab.write_text("\n".join(["<unk>", "</s>", *WORDS[3:]]) + "\n")
    bliss = tmp_path / "corpus.xml.gz"
    with gzip.open(bliss, "wt") as f:
        f.write(
            '<?xml version="1.0" encoding="utf8"?>\n<corpus name="c"><recording name="r" audio="a.wav">'
            '<segment name="s1" start="0" end="1"><orth> the   cat </orth></segment>'
            '<segment name="s2" start="1" end="2"><orth>a mat on the hat</orth></segment>'
            "</recording></corpus>\n"
        )
    tags = tmp_path / "tags.txt"
    tags.write_text("".join(f"corpus/seg{i}\n" for i in range(7)))
    spec = {
        "class": "LmDataset",
        "corpus_file": lambda: [text["txt"], str(bliss)],
        "orth_vocab": {"vocab_file": str(vocab), "unknown_label": "<unk>", "seq_postfix": [1]},
        "seq_list_file": str(tags),
    }
    ours = compare(spec)
    assert [tag for tag, _ in ours][-2:] == ["corpus/seg5", "corpus/seg6"]
    assert ours[-1][1]["data"].tolist() == [7, 8, 6, 2, 5, 1]
    compare({**spec, "seq_list_file": None, "tag_prefix": "lm/", "seq_ordering": "sorted"})


def test_lm_dataset_refuses_what_it_cannot_do_with_a_way_forward(text):
    base = {"class": "LmDataset", "corpus_file": text["txt"]}
    cases = [
        ({}, "give the symbols"),
        ({"orth_symbols_file": text["chars"], "orth_symbols_map_file": text["words"]}, "not both"),
        ({"orth_symbols_file": text["chars"], "phone_info": {"lexicon_file": "x"}}, "dump-dataset"),
        ({"orth_symbols_file": text["chars"], "orth_post_process": "english_cleaners"}, "unidecode"),
        (
            {"orth_symbols_file": text["chars"], "add_delayed_seq_data": True, "delayed_seq_data_start_symbol": "<s>"},
            "delayed_seq_data_start_symbol = '<s>'",
        ),
        (
            {"orth_symbols_file": text["chars"], "auto_replace_unknown_symbol": True, "unknown_symbol": "<unk>"},
            "unknown_symbol = '<unk>'",
        ),
        ({"orth_symbols_file": text["chars"], "parse_orth_opts": {"lowercase": True}}, "parse_orthography"),
        ({"orth_vocab": {"vocab_file": text["chars"]}, "add_delayed_seq_data": True}, "shift 'data'"),
        ({"orth_symbols_file": text["chars"], "seq_list_file": [text["chars"], text["chars"]]}, "one file per"),
        ({"orth_symbols_file": text["chars"], "seq_list_filte_file": "x"}, "seq_list"),
    ]
    for options, message in cases:
        with pytest.raises(ConfigError, match=message):
            init_dataset({**base, **options}, option="train", random_seed=1)


@pytest.mark.slow  # a real rnn.py run: seconds
def test_a_returnn_config_trains_a_language_model_on_lm_dataset(tmp_path, text):
    dev = tmp_path / "dev.txt"
    dev.write_text("a mat on the hat\nthe hat sat\n")
    config = write_config(
        tmp_path,
        f"""
import torch
from torch import nn
train = {{"class": "LmDataset", "corpus_file": [{text["txt"]!r}, {text["gz"]!r}], "orth_symbols_file": {text["chars"]!r},
         "add_delayed_seq_data": True, "auto_replace_unknown_symbol": True, "seq_ordering": "laplace:.2"}}
dev = {{"class": "LmDataset", "corpus_file": {str(dev)!r}, "orth_symbols_file": {text["chars"]!r},
       "add_delayed_seq_data": True, "auto_replace_unknown_symbol": True}}
extern_data = {{"data": {{"shape": (None,), "dtype": "int64", "sparse_dim": 34}},
               "delayed": {{"shape": (None,), "dtype": "int64", "sparse_dim": 34}}}}
batch_size = 60
num_epochs = 1
model = {str(tmp_path / "model")!r}

def get_model(**_kwargs):
    return nn.Sequential(nn.Embedding(34, 8), nn.Linear(8, 34))

def train_step(*, model, extern_data, run_ctx, **_kwargs):
    logits = model(extern_data["delayed"])
    mask = torch.arange(logits.shape[1], device=logits.device)[None] < extern_data["data:seq_len"].to(logits.device)[:, None]
    run_ctx.mark_as_loss(name="ce", loss=nn.functional.cross_entropy(logits[mask], extern_data["data"][mask]))
""",
    )
    run = run_rnn(config, cwd=str(tmp_path))
    assert run.returncode == 0, run.stdout + run.stderr
    assert os.path.exists(tmp_path / "model.001.pt")
    assert "WARNING" not in run.stdout + run.stderr


# -- generated and static datasets ----------------------------------------------------------------------------------
def test_copy_task_and_dummy_datasets_equal_returnns_in_every_epoch():
    copy = {
        "class": "CopyTaskDataset",
        "nsymbols": 5,
        "minlen": 2,
        "maxlen": 6,
        "maxlen_epoch_factor": 1,
        "num_seqs": 7,
    }
    first = compare(copy, epochs=(1, 2))
    assert all((seq["data"] == seq["classes"]).all() and seq["data"].dtype == np.int8 for _, seq in first)
    assert [tag for tag, _ in first] == [f"seq-{i}" for i in range(7)]
    assert [seq["data"].tolist() for _, seq in our_epoch(copy, 2)] != [seq["data"].tolist() for _, seq in first]
    compare({**copy, "fixed_random_seed": 5, "partition_epoch": 2}, epochs=(1, 2, 3))
    fixed = {**copy, "fixed_random_seed": 5, "maxlen_epoch_factor": 0}  # lengths that do not grow
    assert [s["data"].tolist() for _, s in our_epoch(fixed, 1)] == [s["data"].tolist() for _, s in our_epoch(fixed, 3)]
    compare({**copy, "random_seed_offset": 3, "seq_ordering": "sorted"})  # RETURNN keeps its order when asked to sort
    dummy = {"class": "DummyDataset", "input_dim": 3, "output_dim": 4, "num_seqs": 5, "seq_len": 3}
    compare(dummy)
    compare(
        {**dummy, "output_dim": {"classes": (7, 1)}, "input_max_value": 4.0, "input_shift": 0.5, "partition_epoch": 2},
        epochs=(1, 2),
    )


def test_dummy_datasets_with_several_lengths_and_keys_equal_returnns():
    several = {"class": "DummyDatasetMultipleSequenceLength", "input_dim": 2, "output_dim": 3, "num_seqs": 4}
    ours = compare(several)
    assert ours[1][1]["data"].shape == (10, 2) and ours[1][1]["classes"].shape == (20,)
    compare({**several, "seq_len": {"data": 3, "classes": 5}, "input_max_value": 7.0})
    keys = {
        "class": "DummyDatasetMultipleDataKeys",
        "output_dim": {"data": (4, 2), "classes": (6, 1), "speaker": (3, 1)},
        "data_keys": ["speaker", "data", "classes"],
        "num_seqs": 5,
        "seq_len": {"speaker": 1, "data": 7, "classes": 4},
    }
    names = keys["data_keys"]  # RETURNN gives "speaker" too, but lists only data and classes as its keys
    assert compare(keys, keys=names)[2][1]["speaker"].tolist() == [2]
    compare({**keys, "seq_len": 3, "input_shift": 1.0, "input_scale": 0.5}, keys=names)


def test_dummy_generic_dataset_equals_returnns():
    """RETURNN's DummyGenericDataset (what use_dummy_datasets builds) over extern_data dicts: dense float, sparse
    ids, int data, raw audio (1000-8000 samples), several variable axes, seq_lens by key and for all; the same
    values in epochs 1 and 2 (by epoch), 3, and with fixed_random_seed. (Templates of RETURNN Dim objects: RETURNN's
    init_dataset recurses without end on them here, so that port is not compared.)"""
    template = {
        "data": {"dim": 9},
        "classes": {"dim": 5, "sparse": True},
        "alignment": {"shape": (None, 2), "dtype": "int64"},  # (RETURNN cannot take a scalar key here)
        "image": {"shape": (None, None, 3), "dtype": "float16"},
    }
    ours = compare({"class": "DummyGenericDataset", "data_template": template, "num_seqs": 6}, epochs=(1, 2))
    assert {tag for tag, _ in ours} == {f"seq-{i}" for i in range(6)}
    lengths = [seq["data"].shape[0] for _, seq in ours]
    assert min(lengths) >= 5 and max(lengths) <= 15 and len(set(lengths)) > 1
    assert ours[0][1]["classes"].dtype == np.int32 and ours[0][1]["image"].dtype == np.float16
    audio = {"audio": {"shape": (None, 1)}, "text": {"dim": 30, "sparse": True}}
    heard = compare({"class": "DummyGenericDataset", "data_template": audio, "num_seqs": 3, "fixed_random_seed": 7})
    assert all(1000 <= len(seq["audio"]) <= 8000 for _, seq in heard)
    compare(
        {"class": "DummyGenericDataset", "data_template": audio, "num_seqs": 4, "seq_lens": {"audio": (20, 30)}},
        epochs=(3,),
    )
    compare({"class": "DummyGenericDataset", "data_template": template, "num_seqs": 3, "seq_lens": 4})


def test_number_base_convert_and_episodic_copy_tasks_equal_returnns():
    convert = {"class": "TaskNumberBaseConvertDataset", "num_seqs": 6}
    ours = compare(convert, epochs=(1, 2))
    digits, binary = ours[0][1]["data"].tolist(), ours[0][1]["classes"].tolist()
    assert int("".join(map(str, digits)), 8) == int("".join(map(str, binary)), 2)
    compare({**convert, "input_base": 16, "output_base": 3, "min_input_seq_len": 2, "max_input_seq_len": 4})
    episodic = compare({"class": "TaskEpisodicCopyDataset", "num_seqs": 4}, epochs=(1, 3))
    assert all(seq["data"].sum(axis=1).tolist() == [1.0] * len(seq["data"]) for _, seq in episodic)


def test_static_dataset_equals_returnns_in_default_and_sorted_order():
    rng = np.random.default_rng(0)
    data = [
        {
            "data": rng.standard_normal((n, 2)).astype(np.float32),
            "classes": rng.integers(0, 5, n).astype(np.int32),
            "speaker": np.array([i % 2], dtype=np.int64),
        }
        for i, n in enumerate([4, 2, 7, 3, 3, 5])
    ]
    spec = {
        "class": "StaticDataset",
        "data": data,
        "output_dim": {"data": (2, 2), "classes": (5, 1), "speaker": (2, 1)},
    }
    ours = compare(spec)
    assert [tag for tag, _ in ours] == [f"seq-{i}" for i in range(6)]
    for ordering, partition in (("sorted", 1), ("sorted_reverse", 2)):
        compare({**spec, "seq_ordering": ordering, "partition_epoch": partition}, epochs=range(1, partition + 1))
    dataset = init_dataset(spec, option="dev", random_seed=1)
    assert dataset.key_info()["classes"]["sparse_dim"] == 5 and dataset.key_info()["data"]["sparse_dim"] is None


def test_generated_and_static_datasets_refuse_what_they_cannot_do():
    cases = [
        ({"class": "CopyTaskDataset", "nsymbols": 5, "minlen": 2, "maxlen": 6}, "num_seqs = inf"),
        ({"class": "CopyTaskDataset", "nsymbols": 5, "num_seqs": 3}, "need 0 < minlen <= maxlen"),
        ({"class": "DummyDataset", "input_dim": 2, "output_dim": {"targets": 3}, "num_seqs": 3}, "number of classes"),
        ({"class": "DummyDataset", "input_dim": 2, "output_dim": 3, "num_seqs": 3, "seq_len": {"data": 2}}, "per key"),
        ({"class": "StaticDataset", "data": [{"data": np.zeros(3)}, {"x": np.zeros(2)}]}, "sequence 1 has the keys"),
        ({"class": "StaticDataset", "data": [{"data": np.float32(3)}]}, "scalar"),
    ]
    for spec, message in cases:
        with pytest.raises(ConfigError, match=message):
            init_dataset(spec, option="train", random_seed=1)


# -- CombinedDataset ------------------------------------------------------------------------------------------------
def write_returnn_hdf(path, tags: list[str], lengths: list[int], seed: int) -> str:
    """An HDF file written by RETURNN's SimpleHDFWriter: ``data`` [T, 3] float32, ``classes`` [T] int32 (5)."""
    from returnn.datasets.hdf import SimpleHDFWriter

    rng = np.random.default_rng(seed)
    writer = SimpleHDFWriter(str(path), dim=3, ndim=2, extra_type={"classes": (5, 1, "int32")})
    for tag, n in zip(tags, lengths, strict=True):
        features = rng.standard_normal((1, n, 3)).astype(np.float32)
        classes = rng.integers(0, 5, (1, n)).astype(np.int32)
        writer.insert_batch(features, seq_len=[n], seq_tag=[tag], extra={"classes": classes})
    writer.close()
    return str(path)


@pytest.fixture
def two_hdfs(tmp_path) -> tuple[str, str]:
    first = write_returnn_hdf(tmp_path / "a.hdf", [f"a/{i}" for i in range(5)], [4, 2, 6, 3, 5], seed=1)
    second = write_returnn_hdf(tmp_path / "b.hdf", [f"b/{i}" for i in range(4)], [3, 7, 1, 4], seed=2)
    return first, second


TEXT_SEQS = [{"data": np.array(ids, dtype=np.int32)} for ids in ([1, 2, 3], [4, 5], [8, 0, 1, 1])]


def test_combined_dataset_of_hdf_and_static_datasets_equals_returnns(two_hdfs):
    spec = {
        "class": "CombinedDataset",
        "datasets": {
            "asr": {"class": "HDFDataset", "files": [two_hdfs[0]]},
            # RETURNN's LmDataset cannot be combined (it has no corpus sequence index): text as StaticDataset
            "lm": {"class": "StaticDataset", "data": TEXT_SEQS, "output_dim": {"data": (9, 1)}},
            "unused": {"class": "HDFDataset", "files": ["/nonexistent.hdf"]},  # not in data_map: not built
        },
        "data_map": {("asr", "data"): "data", ("asr", "classes"): "classes", ("lm", "data"): "text"},
    }
    ours = compare(spec)
    assert [tag for tag, _ in ours] == [f"a/{i}" for i in range(5)] + ["seq-0", "seq-1", "seq-2"]
    assert ours[0][1]["text"].shape == (0,) and ours[-1][1]["data"].shape == (0, 3)
    mixed = compare({**spec, "seq_ordering": "random_dataset", "partition_epoch": 2}, epochs=(1, 2, 3))
    assert [tag for tag, _ in mixed] != [tag for tag, _ in ours[: len(mixed)]]
    compare({**spec, "seq_ordering": "random_dataset", "fixed_random_seed": 3})
    compare({**spec, "sampling_sizes": {"asr": 3, "lm": 2}}, epochs=(1, 2, 3))
    shared = {**spec, "data_map": {("asr", "data"): "data", ("asr", "classes"): "classes", ("lm", "data"): "classes"}}
    compare(shared)  # ids of two inventories (5 and 9 classes) on one key
    assert init_dataset(shared, option="dev", random_seed=1).key_info()["classes"]["sparse_dim"] == 9
    sub_ordered = {**spec["datasets"]["asr"], "seq_ordering": "sorted_reverse", "partition_epoch": 2}
    compare({**spec, "datasets": {**spec["datasets"], "asr": sub_ordered}}, epochs=(1, 2))


def test_combined_dataset_sorts_all_datasets_together_as_returnn(two_hdfs):
    spec = {
        "class": "CombinedDataset",
        "datasets": {
            "b": {"class": "HDFDataset", "files": [two_hdfs[1]]},
            "a": {"class": "HDFDataset", "files": [two_hdfs[0]]},
        },
        "data_map": {
            ("a", "data"): "data",
            ("a", "classes"): "classes",
            ("b", "data"): "data",
            ("b", "classes"): "classes",
        },
    }
    for ordering, partition in (("sorted", 1), ("sorted_reverse", 2)):
        ours = compare({**spec, "seq_ordering": ordering, "partition_epoch": partition}, epochs=range(1, partition + 1))
    assert [tag for tag, _ in ours][:3] == ["b/1", "a/2", "a/4"]  # the longest of both files first


def test_combined_dataset_refuses_what_it_cannot_do():
    hdf = {"class": "HDFDataset", "files": ["x.hdf"]}
    cases = [
        ({"datasets": {"a": hdf}, "data_map": {"data": ("a", "data")}}, "MetaDataset's direction"),
        ({"datasets": {"a": hdf}, "data_map": {("b", "data"): "data"}}, "names dataset 'b'"),
        ({"datasets": {"a": hdf}, "data_map": {("a", "data"): "data"}, "seq_ordering": "interleave"}, "random_dataset"),
        ({"datasets": {"a": hdf}, "data_map": {("a", "data"): "data"}, "window": 3}, "window must be 1"),
    ]
    for options, message in cases:
        with pytest.raises(ConfigError, match=message):
            init_dataset({"class": "CombinedDataset", **options}, option="train", random_seed=1)


# -- PostprocessingDataset ------------------------------------------------------------------------------------------
def noisy(data, *, rng, **_kwargs):
    """A map_seq as RETURNN configs write them: random gain and noise drawn from RETURNN's rng."""
    features = data.data["data"].raw_tensor
    gain = rng.uniform(0.5, 1.5)
    data.data["data"].raw_tensor = (features * gain + rng.normal(0, 0.1, features.shape)).astype(np.float32)
    return data


def with_energy(data, *, seq_idx, **_kwargs):
    """A map_seq that adds a key (declared in map_outputs)."""
    from returnn.tensor import Dim, Tensor

    features = data.data["data"].raw_tensor
    energy = (features**2).sum(axis=1).astype(np.float32) + seq_idx
    data.data["energy"] = Tensor("energy", dims=[Dim(None, name="time")], dtype="float32", raw_tensor=energy)
    return data


def merge_pairs_drop_short(iterator, *, rng, **_kwargs):
    """A map_seq_stream: sequences shorter than 3 frames dropped, the others joined in pairs (tag of the first)."""
    held = None
    for data in iterator:
        if len(data.data["classes"].raw_tensor) < 3:
            continue
        if held is None:
            held = data
            continue
        for key in ("data", "classes"):
            held.data[key].raw_tensor = np.concatenate([held.data[key].raw_tensor, data.data[key].raw_tensor])
        yield held
        held = None
    if held is not None:
        yield held


def test_postprocessing_dataset_map_seq_and_map_seq_stream_equal_returnns(two_hdfs):
    hdf = {"class": "HDFDataset", "files": [two_hdfs[0]]}
    spec = {"class": "PostprocessingDataset", "dataset": hdf, "map_seq": noisy}
    ours = compare(spec, epochs=(1, 2))
    assert [tag for tag, _ in ours] == [f"a/{i}" for i in range(5)]
    compare({**spec, "dataset": {**hdf, "seq_ordering": "sorted_reverse", "partition_epoch": 2}}, epochs=(1, 2, 3))
    compare({**spec, "fixed_random_seed": 7})
    energy = {
        **spec,
        "map_seq": with_energy,
        "map_outputs": {
            "data": {"shape": (None, 3), "dtype": "float32"},
            "classes": {"shape": (None,), "dtype": "int32", "sparse_dim": 5},
            "energy": {"shape": (None,), "dtype": "float32"},
        },
    }
    assert init_dataset(energy, option="dev", random_seed=1).key_info()["energy"]["shape"] == (None,)
    compare({**energy, "map_outputs": {k: v for k, v in energy["map_outputs"].items() if k != "classes"}})
    merged = compare({"class": "PostprocessingDataset", "dataset": hdf, "map_seq_stream": merge_pairs_drop_short})
    assert [tag for tag, _ in merged] == ["a/0", "a/3"]  # a/1 (2 frames) dropped; a/0+a/2, a/3+a/4
    assert merged[0][1]["data"].shape == (10, 3)


def test_postprocessing_dataset_refuses_what_it_cannot_do(two_hdfs):
    hdf = {"class": "HDFDataset", "files": [two_hdfs[0]]}
    cases = [
        ({"dataset": hdf}, "exactly one"),
        ({"dataset": hdf, "map_seq": noisy, "map_seq_stream": merge_pairs_drop_short}, "exactly one"),
        ({"dataset": hdf, "map_seq": lambda data, rng: data}, r"\*\*kwargs"),
        ({"dataset": hdf, "map_seq": noisy, "seq_ordering": "sorted"}, "give seq_ordering in 'dataset'"),
        ({"dataset": hdf, "map_seq": noisy, "num_workers": 2}, "MultiProcDataset"),
    ]
    for options, message in cases:
        with pytest.raises(ConfigError, match=message):
            init_dataset({"class": "PostprocessingDataset", **options}, option="train", random_seed=1)
    wrong = {"class": "PostprocessingDataset", "dataset": hdf, "map_seq": with_energy}  # a new key, undeclared
    dataset = init_dataset(wrong, option="dev", random_seed=1)
    assert "energy" not in dataset.key_info() and dataset.num_seqs == 5  # an undeclared extra key is not a batch key


# -- options every dataset takes ----------------------------------------------------------------------------------
def test_seq_list_filter_file_and_repeat_epoch_select_returnns_sequences(two_hdfs, text, tmp_path):
    keep = tmp_path / "keep.txt"
    keep.write_text("a/4\na/1\na/2\nline-3\nline-0\nseq-2\nseq-0\n")
    with gzip.open(tmp_path / "keep.pkl.gz", "wb") as f:
        pickle.dump(["a/4", "a/1", "a/2"], f)
    hdf = {"class": "HDFDataset", "files": [two_hdfs[0]], "seq_list_filter_file": str(keep)}
    ours = compare(hdf)
    assert [tag for tag, _ in ours] == ["a/1", "a/2", "a/4"]  # the file's tags, in the dataset's order
    ordered = {**hdf, "seq_ordering": "sorted_reverse", "partition_epoch": 2}
    assert [tag for tag, _ in compare(ordered, epochs=(1, 2))] == ["a/2", "a/4"]  # sub-epoch 1: a/2, a/4, a/0
    repeated = {**hdf, "seq_ordering": "sorted", "repeat_epoch": 2}
    assert [tag for tag, _ in compare(repeated)] == ["a/1", "a/4", "a/2"] * 2
    compare({**repeated, "seq_list_filter_file": str(tmp_path / "keep.pkl.gz")}, epochs=(1, 2))
    lm = {"class": "LmDataset", "corpus_file": text["txt"], "orth_symbols_file": text["chars"], "repeat_epoch": 2}
    assert len(compare({**lm, "seq_list_filter_file": str(keep), "seq_ordering": "sorted"})) == 4
    static = {"class": "StaticDataset", "data": TEXT_SEQS, "seq_list_filter_file": str(keep)}
    assert [tag for tag, _ in compare(static)] == ["seq-0", "seq-2"]
    with pytest.raises(DataError, match="no sequence of this epoch is listed"):
        our_epoch({**hdf, "files": [two_hdfs[1]]})
    with pytest.raises(ConfigError, match="repeat_epoch must be an int >= 1"):
        init_dataset({**hdf, "repeat_epoch": 0}, option="dev", random_seed=1)
    with pytest.raises(ConfigError, match="RETURNN prohibits combining them"):
        init_dataset({**ordered, "repeat_epoch": 2}, option="dev", random_seed=1)


def test_ogg_zip_epoch_wise_filter_keeps_returnns_short_sequences(tmp_path):
    pytest.importorskip("soundfile")
    from test_returnn_datasets import make_ogg_zip  # durations 0.50, 0.30, 0.80, 0.42, 0.25 s

    spec = {
        "class": "OggZipDataset",
        "path": make_ogg_zip(str(tmp_path / "corpus.zip")),
        "audio": {"features": "raw", "sample_rate": 16000},
        "targets": None,
        "epoch_wise_filter": {(1, 2): {"max_mean_len": 35}},
        "seq_ordering": "sorted_reverse",
    }
    ours = compare(spec, epochs=(1, 2, 3))
    # the shortest four (mean 36.75 centiseconds: RETURNN stops at the first mean not below the maximum)
    assert [tag for tag, _ in ours] == ["corpus/1", "corpus/4", "corpus/2", "corpus/5"]
    assert len(our_epoch(spec, 3)) == 5  # no filter after epoch 2
    compare({**spec, "epoch_wise_filter": {(None, -1): {"max_mean_len": 27.5}}, "seq_ordering": "default"})
    with pytest.raises(ConfigError, match="max_mean_len only"):
        init_dataset({**spec, "epoch_wise_filter": {(1, 2): {"use_new_filter": True}}}, option="dev", random_seed=1)


def test_unique_seq_tags_and_seq_order_seq_lens_file_order_as_returnn(two_hdfs, tmp_path):
    again = write_returnn_hdf(tmp_path / "again.hdf", ["a/3", "a/9", "a/0"], [2, 2, 2], seed=3)
    hdf = {"class": "HDFDataset", "files": [two_hdfs[0], again], "unique_seq_tags": True}
    assert [tag for tag, _ in compare(hdf)] == ["a/0", "a/1", "a/2", "a/3", "a/4", "a/9"]
    compare({**hdf, "seq_ordering": "sorted_reverse"})
    lens = tmp_path / "lens.txt.gz"
    with gzip.open(lens, "wt") as f:
        f.write(repr({f"a/{i}": length for i, length in enumerate([3.5, 9, 1, 7, 2])}))
    ordered = {
        "class": "HDFDataset",
        "files": [two_hdfs[0]],
        "seq_ordering": "sorted",
        "seq_order_seq_lens_file": str(lens),
    }
    assert [tag for tag, _ in compare(ordered)] == ["a/2", "a/4", "a/0", "a/3", "a/1"]  # the file's lengths
    with pytest.raises(ConfigError, match="has no length for 'a/9'"):
        our_epoch({**ordered, "files": [again]})


def test_returnns_tensorflow_era_dataset_parameters_are_accepted_at_their_defaults_only(two_hdfs):
    hdf = {"class": "HDFDataset", "files": [two_hdfs[0]]}
    defaults = {"window": 1, "context_window": None, "chunking": None, "min_chunk_size": 0, "chunking_variance": 0}
    accepted = {**hdf, **defaults, "shuffle_frames_of_nseqs": 0, "estimated_num_seqs": 100, "cache_byte_size": 0}
    assert [tag for tag, _ in our_epoch(accepted)] == [f"a/{i}" for i in range(5)]
    # window: tests/test_returnn_window.py (HDFDataset stacks frames, as RETURNN's); the dataset's own chunking and
    # context_window: without effect in RETURNN's torch engine (tests/test_returnn_data_options.py)
    with pytest.raises(ConfigError, match="shuffle_frames_of_nseqs = 2"):
        init_dataset({**hdf, "shuffle_frames_of_nseqs": 2, "seq_ordering": "sorted"}, option="train", random_seed=1)
    offset = init_dataset({**hdf, "seq_ordering": "random", "random_seed_offset": 5}, option="train", random_seed=1)
    plain = init_dataset({**hdf, "seq_ordering": "random"}, option="train", random_seed=1)
    assert offset.random_seed == plain.random_seed + 5


def test_ogg_zip_targets_post_process_and_symlinked_name_as_returnn(tmp_path):
    pytest.importorskip("soundfile")
    from test_returnn_datasets import WORDS, make_ogg_zip

    vocab = tmp_path / "words.txt"
    vocab.write_text("\n".join(WORDS) + "\n")
    real = make_ogg_zip(str(tmp_path / "corpus.zip"))
    os.symlink(real, tmp_path / "link.zip")
    spec = {
        "class": "OggZipDataset",
        "path": str(tmp_path / "link.zip"),
        "resolve_symlink_for_name": True,
        "audio": None,
        "targets": {"vocab_file": str(vocab), "unknown_label": "<unk>"},
        "targets_post_process": lambda text: text.replace("cats", "cat").replace("hats", "hat"),
    }
    ours = compare(spec)
    assert ours[3][1]["classes"].tolist() == [2, 9, 5] and bytes(ours[3][1]["orth"]) == b"cats and hats"


def test_meta_dataset_seq_lens_file_and_data_dims_as_returnn(two_hdfs, tmp_path):
    twin = write_returnn_hdf(tmp_path / "twin.hdf", [f"a/{i}" for i in range(5)], [4, 2, 6, 3, 5], seed=9)
    lens = tmp_path / "lens.json"
    lens.write_text(json.dumps({f"a/{i}": {"data": n, "classes": n} for i, n in enumerate([30, 10, 50, 20, 40])}))
    spec = {
        "class": "MetaDataset",
        "datasets": {
            "feat": {"class": "HDFDataset", "files": [two_hdfs[0]]},
            "twin": {"class": "HDFDataset", "files": [twin]},
        },
        "data_map": {"data": ("feat", "data"), "classes": ("twin", "classes")},
        "seq_lens_file": str(lens),
        "seq_ordering": "sorted_reverse",
        "data_dims": {"data": (3, 2), "classes": (5, 1)},
        "data_dtypes": {"data": "float32"},
    }
    assert [tag for tag, _ in compare(spec)] == ["a/2", "a/4", "a/0", "a/3", "a/1"]  # the file's lengths
    with pytest.raises(ConfigError, match=r"data_dims\['classes'\] = \(7, 1\), but the data has dim 5"):
        init_dataset({**spec, "data_dims": {"classes": (7, 1)}}, option="dev", random_seed=1)
    multi = {
        "class": "MultiProcDataset",
        "dataset": spec,
        "num_workers": 1,
        "buffer_size": 2,
        "sharding_method": "seq_order",
    }
    assert init_dataset(multi, option="dev", random_seed=1).num_workers == 1
    with pytest.raises(ConfigError, match="'dedicated' lets each worker"):
        init_dataset({**multi, "sharding_method": "dedicated"}, option="dev", random_seed=1)


def halve_rate(*, audio, sample_rate, random_state, **_kwargs):
    """A deterministic audio pre_process (RETURNN's signature): every other sample, half the amplitude."""
    return audio[::2] * 0.5


def random_gain(*, audio, random_state, **_kwargs):
    """A random audio pre_process."""
    return audio * random_state.uniform(0.5, 1.0)


def test_ogg_zip_audio_pre_process_as_returnn(tmp_path):
    pytest.importorskip("soundfile")
    from test_returnn_datasets import make_ogg_zip

    spec = {
        "class": "OggZipDataset",
        "path": make_ogg_zip(str(tmp_path / "corpus.zip")),
        "audio": {"features": "raw", "sample_rate": 16000, "pre_process": halve_rate},
        "targets": None,
    }
    ours = compare(spec, epochs=(1, 2))
    assert ours[0][1]["data"].shape == (4000, 1) and float(np.abs(ours[0][1]["data"]).max()) == 0.5
    randomized = {**spec, "audio": {**spec["audio"], "pre_process": random_gain}}
    first, again, second = our_epoch(randomized, 1), our_epoch(randomized, 1), our_epoch(randomized, 2)
    assert all((a[1]["data"] == b[1]["data"]).all() for a, b in zip(first, again, strict=True))  # a step reads the same
    assert not all((a[1]["data"] == b[1]["data"]).all() for a, b in zip(first, second, strict=True))  # new draws


def test_ogg_zip_separate_index_and_directory_layout_as_returnn(tmp_path):
    pytest.importorskip("soundfile")
    import zipfile

    from test_returnn_datasets import UTTERANCES, make_ogg_zip

    zipped = make_ogg_zip(str(tmp_path / "corpus.zip"))
    raw = {"audio": {"features": "raw", "sample_rate": 16000}, "targets": None}
    with zipfile.ZipFile(zipped) as f:
        f.extractall(tmp_path / "unpacked")  # unpacked/corpus.txt and unpacked/corpus/*.ogg: RETURNN's directory mode
        entries = ast.literal_eval(f.read("corpus.txt").decode())
    directory = compare({"class": "OggZipDataset", "path": str(tmp_path / "unpacked" / "corpus"), **raw})
    assert [tag for tag, _ in directory] == [tag for tag, _, _ in UTTERANCES]
    separate = tmp_path / "corpus.txt.gz"
    with gzip.open(separate, "wt") as f:
        f.write(repr([{**entry, "seq_name": "renamed/" + entry["seq_name"]} for entry in entries[1:4]]))
    ours = compare({"class": "OggZipDataset", "path": [zipped, str(separate)], **raw})
    assert [tag for tag, _ in ours] == ["renamed/corpus/2", "renamed/corpus/3", "renamed/corpus/4"]
    with pytest.raises(ConfigError, match="has no zip of the same name"):
        init_dataset({"class": "OggZipDataset", "path": [str(separate)], **raw}, option="dev", random_seed=1)


def hdf_sub_epoch(files):
    """get_sub_epoch_dataset of the DistributeFilesDataset tests."""
    return {"class": "HDFDataset", "files": files, "seq_ordering": "default"}


def test_distribute_files_dataset_reads_file_lists_and_gives_the_files_tags_as_returnn(tmp_path):
    files = [
        write_returnn_hdf(tmp_path / f"f{i}.hdf", [f"f{i}/{j}" for j in range(3)], [2 + i, 3, 4 - i % 2], seed=i)
        for i in range(5)
    ]
    (tmp_path / "files.txt").write_text("# the shards\n" + "\n".join(files) + "\n\n")
    (tmp_path / "files.json").write_text(json.dumps(files))
    (tmp_path / "files.py").write_text(repr(files))
    spec = {
        "class": "DistributeFilesDataset",
        "files": str(tmp_path / "files.txt"),
        "get_sub_epoch_dataset": hdf_sub_epoch,
        "partition_epoch": 2,
        "seq_ordering": "default",
        "use_worker_proc": False,
    }
    for epoch in (1, 2, 3):
        ours = our_epoch(spec, epoch, option="train")
        assert_same(ours, returnn_epoch(spec, epoch))
    assert [tag for tag, _ in our_epoch(spec, 2, option="train")] == [f"f{i}/{j}" for i in (3, 4) for j in range(3)]
    for listing in ("files.json", "files.py"):
        assert_same(our_epoch({**spec, "files": str(tmp_path / listing)}, 1, option="train"), returnn_epoch(spec, 1))
    assert_same(our_epoch({**spec, "files": lambda: files}, 1, option="train"), returnn_epoch(spec, 1))
    with pytest.raises(ConfigError, match="must be .txt"):
        init_dataset({**spec, "files": str(files[0])}, option="train", random_seed=1)


def test_concat_dataset_gives_each_datasets_epoch_and_tags_as_returnn(two_hdfs):
    spec = {
        "class": "ConcatDataset",
        "datasets": [
            {"class": "HDFDataset", "files": [two_hdfs[1]], "seq_ordering": "sorted_reverse"},
            {"class": "HDFDataset", "files": [two_hdfs[0]], "partition_epoch": 2},
        ],
    }
    ours = compare(spec, epochs=(1, 2))
    assert [tag for tag, _ in ours] == ["b/1", "b/3", "b/0", "b/2", "a/0", "a/1", "a/2"]


def test_a_returnn_config_trains_on_postprocessed_combined_datasets(tmp_path, text):
    config = write_config(
        tmp_path,
        f"""
import numpy as np
from torch import nn

def flip(data, *, rng, **kwargs):
    if rng.uniform() < 0.5:
        data.data["data"].raw_tensor = data.data["data"].raw_tensor[::-1].copy()
    return data

train = {{"class": "PostprocessingDataset", "map_seq": flip, "dataset": {{
    "class": "CombinedDataset", "seq_ordering": "random_dataset", "partition_epoch": 2,
    "datasets": {{"lm": {{"class": "LmDataset", "corpus_file": {text["txt"]!r}, "orth_symbols_file": {text["chars"]!r},
                        "auto_replace_unknown_symbol": True}},
                 "copy": {{"class": "CopyTaskDataset", "nsymbols": 30, "minlen": 2, "maxlen": 5, "num_seqs": 6}}}},
    "data_map": {{("lm", "data"): "data", ("copy", "data"): "data"}}}}}}
dev = {{"class": "StaticDataset", "data": [{{"data": np.array([5, 6, 7], dtype=np.int8)}}, {{"data": np.array([8, 9], dtype=np.int8)}}]}}
extern_data = {{"data": {{"shape": (None,), "dtype": "int64", "sparse_dim": 34}}}}
batch_size = 30
num_epochs = 1
model = {str(tmp_path / "model")!r}

def get_model(**_kwargs):
    return nn.Sequential(nn.Embedding(34, 8), nn.Linear(8, 34))

def train_step(*, model, extern_data, run_ctx, **_kwargs):
    x = extern_data["data"]
    logits = model(x[:, :-1])
    run_ctx.mark_as_loss(name="ce", loss=nn.functional.cross_entropy(logits.flatten(0, 1), x[:, 1:].flatten()))
""",
    )
    run = run_rnn(config, cwd=str(tmp_path))
    assert run.returncode == 0, run.stdout + run.stderr
    assert os.path.exists(tmp_path / "model.001.pt")
    assert "Traceback" not in run.stdout + run.stderr


def test_postprocessing_laplace_ordering_and_sequential_equal_returnns(two_hdfs):
    from returnn.datasets import postprocessing as returnn_pp

    from framework.datasets.postprocessing import LaplaceOrdering, Sequential

    hdf = {"class": "HDFDataset", "files": [two_hdfs[0], two_hdfs[1]]}
    theirs = returnn_epoch(
        {
            "class": "PostprocessingDataset",
            "dataset": hdf,
            "map_seq_stream": returnn_pp.Sequential(merge_pairs_drop_short, returnn_pp.LaplaceOrdering(2)),
        }
    )
    spec = {
        "class": "PostprocessingDataset",
        "dataset": hdf,
        "map_seq_stream": Sequential(merge_pairs_drop_short, LaplaceOrdering(2)),
    }
    ours = our_epoch(spec)
    assert_same(ours, theirs)
    lengths = [len(seq["classes"]) for _, seq in ours]
    assert lengths[:2] == sorted(lengths[:2]) and lengths[2:4] == sorted(lengths[2:4], reverse=True)
    assert (
        Sequential(LaplaceOrdering(3)).preserves_num_seqs and not Sequential(merge_pairs_drop_short).preserves_num_seqs
    )
    with_returnns = {**spec, "map_seq_stream": returnn_pp.LaplaceOrdering(3)}  # RETURNN's own helper, here too
    assert len(compare(with_returnns)) == 9
