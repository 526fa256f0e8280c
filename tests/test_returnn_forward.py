"""task=forward as RETURNN's engines run it: what a ``forward_callback`` gets, compared with RETURNN's own
``python -m returnn`` on the same checkpoint and HDF files (RETURNN's writer); MiniReturnn's forward (its ``forward``
dataset, hooks and ``data``); a forward without a checkpoint. The collected forward configs
(tests/returnn/configs/43-54) run in tools/measure-returnn-configs.py, a sample of them here."""

from __future__ import annotations

import os
import pickle

import numpy as np
import pytest
import torch

from conftest import run_module, run_script

pytest.importorskip("returnn")

from test_returnn_datasets_more import write_returnn_hdf  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CONFIGS = os.path.join(ROOT, "tests", "returnn", "configs")

# The same callback in both runs: each sequence's outputs as process_seq sees them, pickled at finish().
CALLBACK = """#!rnn.py
import pickle

import numpy as np
import torch
from returnn.forward_iface import ForwardCallbackIface
from returnn.tensor import Tensor, TensorDict

backend = "torch"
task = "forward"
device = "cpu"
batch_size = 12
torch_dataloader_opts = {"num_workers": 0}
extern_data = {"data": {"dim": 3}, "classes": {"dim": 5, "sparse": True}}


def get_model(**_kwargs):
    return torch.nn.Linear(3, 5)


class Dump(ForwardCallbackIface):
    def init(self, *, model):
        self.seqs = []
        self.model = type(model).__name__

    def process_seq(self, *, seq_tag, outputs):
        assert isinstance(outputs, TensorDict)
        seen = {}
        for name, out in outputs.data.items():
            assert isinstance(out, Tensor) and isinstance(out.raw_tensor, np.ndarray)
            dims = [(d.dimension, None if d.dyn_size_ext is None else int(d.dyn_size_ext.raw_tensor)) for d in out.dims]
            sparse = out.sparse_dim.dimension if out.sparse_dim is not None else None
            feature = out.feature_dim.dimension if out.feature_dim is not None else None
            seen[name] = (out.raw_tensor.copy(), dims, sparse, feature, out.dtype, out.batch_ndim)
        self.seqs.append((seq_tag, seen))

    def finish(self):
        with open(OUT_FILE, "wb") as f:
            pickle.dump((self.model, self.seqs), f)


forward_callback = Dump
"""

RETURNN_STEP = """
def forward_step(*, model, extern_data, **_kwargs):
    import returnn.frontend as rf
    from returnn.tensor import Dim

    data = extern_data["data"]
    out = torch.log_softmax(model(data.raw_tensor), dim=-1)
    rf.get_run_ctx().mark_as_output(out, "output", dims=[data.dims[0], data.dims[1], Dim(5, name="out")])
    rf.get_run_ctx().mark_as_output(extern_data["classes"], "classes")
    rf.get_run_ctx().mark_as_output(data.raw_tensor * 2, "raw")  # a raw tensor without dims: static, padded
"""

OUR_STEP = """
def forward_step(*, model, extern_data, **_kwargs):
    from framework import get_run_ctx

    data, lengths = extern_data["data"], extern_data["data:seq_len"]
    get_run_ctx().mark_as_output(torch.log_softmax(model(data), dim=-1), "output", seq_len=lengths)
    get_run_ctx().mark_as_output(extern_data["classes"], "classes", seq_len=extern_data["classes:seq_len"])
    get_run_ctx().mark_as_output(data * 2, "raw")
"""


def _env(cwd) -> dict[str, str]:
    return dict(os.environ, OMP_NUM_THREADS="1", FIXTURE_OUT=str(cwd), PYTHONPATH=CONFIGS + os.pathsep + ROOT)


@pytest.mark.slow
def test_a_forward_callback_gets_returnns_tensors_on_the_same_checkpoint_and_data(tmp_path):
    """process_seq gets what RETURNN's Engine.forward_with_callback gives it, run by RETURNN itself (python -m returnn)
    on the same checkpoint and HDF files: the same tags in the same order, and per output the same values (cut to the
    sequence's length where lengths were given, padded where a raw tensor was marked without), dims with their
    dyn_size_ext, sparse_dim, feature_dim, dtype; RETURNN's own Tensor and TensorDict classes. Also without any
    checkpoint: RETURNN runs the fresh model (epoch 1), so here (the values that do not depend on it compared)."""
    lengths = [4, 2, 6, 3, 5, 1, 7]
    hdf = write_returnn_hdf(tmp_path / "a.hdf", [f"a/{i}" for i in range(len(lengths))], lengths, seed=3)
    checkpoint = tmp_path / "model.pt"
    torch.manual_seed(1)
    torch.save({"model": torch.nn.Linear(3, 5).state_dict(), "epoch": 3, "step": 10}, checkpoint)
    for case, load in (("load", f"load = {str(checkpoint)!r}\n"), ("fresh", "")):
        runs = {}
        for who, step in (("returnn", RETURNN_STEP), ("ours", OUR_STEP)):
            out = tmp_path / f"{case}_{who}.pkl"
            config = tmp_path / f"{case}_{who}.config"
            data = f"forward_data = {{'class': 'HDFDataset', 'files': [{hdf!r}]}}\nOUT_FILE = {str(out)!r}\n"
            config.write_text(CALLBACK + step + data + load)
            if who == "returnn":
                result = run_module("returnn", str(config), cwd=str(tmp_path), env=_env(tmp_path), timeout=300)
            else:
                result = run_script(os.path.join(ROOT, "rnn.py"), str(config), cwd=str(tmp_path), env=_env(tmp_path))
            assert result.returncode == 0, (who, case, result.stdout[-3000:], result.stderr[-3000:])
            with open(out, "rb") as f:
                runs[who] = pickle.load(f)
        (their_model, theirs), (our_model, ours) = runs["returnn"], runs["ours"]
        largest = 0.0
        assert our_model == their_model == "Linear"
        assert [tag for tag, _ in ours] == [tag for tag, _ in theirs]
        assert [tag for tag, _ in theirs][:2] == ["a/6", "a/2"]  # longest first, as RETURNN sorts its forward data
        for (tag, mine), (_, their) in zip(ours, theirs, strict=True):
            assert sorted(mine) == sorted(their) == ["classes", "output", "raw"]
            for name in their:
                if case == "fresh" and name == "output":  # the fresh model's values are its own initialisation
                    assert mine[name][1:] == their[name][1:], (tag, name)
                    continue
                largest = max(largest, float(np.max(np.abs(mine[name][0] - their[name][0]), initial=0.0)))
                assert mine[name][0].dtype == their[name][0].dtype, (tag, name)
                assert mine[name][1:] == their[name][1:], (tag, name)  # dims, sparse, feature, dtype, batch_ndim
        print(f"{case}: {len(theirs)} sequences, 3 outputs each, largest difference {largest:.3g}")
        assert largest <= 1e-6
    # the shapes RETURNN gave, for the record: output [T, 5] with T's length, classes [T] sparse 5, raw padded
    assert their["output"][1] == [(None, lengths[int(tag[2:])]), (5, None)]
    assert their["classes"][1:3] == ([(None, lengths[int(tag[2:])])], 5)
    assert their["raw"][1][1] == (3, None) and their["raw"][1][0][0] >= lengths[int(tag[2:])]  # its batch's length


MINIRETURNN = """
import functools

import numpy as np
import torch

backend = "torch"
task = "forward"
device = "cpu"
batch_size = 12
extern_data = {"data": {"dim": 3}, "classes": {"dim": 5, "sparse": True}}
forward = {"class": "HDFDataset", "files": [HDF]}


def get_model(**_kwargs):
    return torch.nn.Linear(3, 5)


def _init_hook(run_ctx, **kwargs):
    run_ctx.out = open("search_out.py", "wt")
    run_ctx.out.write("{\\n")
    run_ctx.prefix = kwargs["prefix"]
    run_ctx.calls = run_ctx.seen = 0
    assert len(kwargs) == 2 and [k for k in kwargs if k != "prefix"][0].startswith("__random_arg_")


def forward_finish_hook(run_ctx, **kwargs):
    run_ctx.out.write("}\\n")
    run_ctx.out.close()
    with open("steps.txt", "w") as f:
        f.write(str(run_ctx.calls))


forward_init_hook = functools.partial(_init_hook, prefix="hyp")


def forward_step(*, model, data, run_ctx, **kwargs):
    assert set(data) == {"data", "data:size0", "data:size1", "data:size2", "classes", "classes:size0",
                         "classes:size1", "seq_idx", "seq_tag"}, sorted(data)
    assert isinstance(data["seq_tag"], list) and int(data["data:size0"]) == len(data["seq_tag"])
    assert data["data:size2"].tolist() == [3] * len(data["seq_tag"])
    assert len(kwargs) == 1 and next(iter(kwargs)).startswith("__fwd_compatible_random_arg_")
    assert data["seq_idx"] == list(range(run_ctx.seen, run_ctx.seen + len(data["seq_tag"])))
    run_ctx.seen += len(data["seq_tag"])
    run_ctx.calls += 1
    best = model(data["data"]).argmax(-1)
    for tag, labels, length in zip(data["seq_tag"], best, data["data:size1"]):
        run_ctx.out.write("%r: %r,\\n" % (tag, run_ctx.prefix + " " + " ".join(map(str, labels[:length].tolist()))))
"""


def test_miniretunns_forward_runs_its_hooks_around_steps_that_get_its_data_and_one_run_ctx(tmp_path):
    """MiniReturnn (the RETURNN fork of i6's torch setups) forwards its ``forward`` dataset: forward_init_hook(run_ctx)
    first, then forward_step(model=, data=, run_ctx=) on each batch, its collated data (key, key:sizeN, seq_tag as a
    list) and the same run_ctx (what the hook set is there), forward_finish_hook at the end; no output file. The
    dataset keeps its own order (MiniReturnn does not sort). Without a checkpoint, the fresh model runs. (MiniReturnn
    itself, github.com/JackTemaki/MiniReturnn at 6613b775, run on such a config with a checkpoint gave the same
    batches, keys, shapes, dtypes, lengths, tags, seq_idx and model outputs: it is not installed here to run.)"""
    lengths = [4, 2, 6, 3, 5]
    hdf = write_returnn_hdf(tmp_path / "a.hdf", [f"a/{i}" for i in range(len(lengths))], lengths, seed=3)
    config = tmp_path / "mini.config"
    config.write_text(f"HDF = {hdf!r}\n" + MINIRETURNN)
    result = run_script(os.path.join(ROOT, "rnn.py"), str(config), cwd=str(tmp_path), env=_env(tmp_path))
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    # three batches of at most 12 padded frames ([4, 2], [6, 3], [5]), counted on the one run_ctx of hooks and steps
    assert (tmp_path / "steps.txt").read_text() == "3"
    written = eval((tmp_path / "search_out.py").read_text())  # the file MiniReturnn's recognition writes
    assert list(written) == [f"a/{i}" for i in range(len(lengths))]
    assert all(
        text.startswith("hyp ") and len(text.split()) == 1 + n
        for text, n in zip(written.values(), lengths, strict=True)
    )
    assert not [name for name in os.listdir(tmp_path) if name.endswith((".npz", ".hdf")) and name != "a.hdf"]


def test_a_configs_dataclass_and_an_unset_accumulation_load_as_in_returnn(tmp_path):
    """A dataclass in a config works, as RETURNN registers its config as a module (MiniReturnn decoders define
    their DecoderConfig in the config); accum_grad_multiple_step = None (zeyer's SharedPostConfig) is unset outside
    training, which alone reads it in RETURNN."""
    from framework.base.config import load_config
    from framework.base.errors import ConfigError

    text = (
        "from dataclasses import dataclass\n\n@dataclass\nclass DecoderConfig:\n    returnn_vocab: str\n\n"
        "decoder = DecoderConfig(returnn_vocab='x')\nbackend = 'torch'\naccum_grad_multiple_step = None\n"
    )
    path = tmp_path / "c.config"
    path.write_text(text + "task = 'forward'\n")
    config = load_config([str(path)], {"device": "cpu"})
    assert config.get("decoder").returnn_vocab == "x" and config.int("accum_grad_multiple_step") == 1
    path.write_text(text + "task = 'train'\n")
    with pytest.raises(ConfigError, match="accum_grad_multiple_step"):
        load_config([str(path)], {"device": "cpu"})


FORWARD_SAMPLE = ["45_zeyer_forward_to_hdf.config", "47_rossenbach_jaist_ctc_greedy_search.config"]


@pytest.mark.slow
@pytest.mark.parametrize("name", FORWARD_SAMPLE)
def test_collected_forward_config_runs_and_writes_its_files(tmp_path, name):
    """A sample of the collected forward configs: a ReturnnForwardJobV2 config whose callback writes HDF with
    RETURNN's SimpleHDFWriter (read back by RETURNN's HDFDataset), and a MiniReturnn recognition (search_out.py)."""
    result = run_script(
        os.path.join(ROOT, "rnn.py"),
        os.path.join(CONFIGS, name),
        "++device",
        "'cpu'",
        cwd=str(tmp_path),
        env=_env(tmp_path),
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    if name.startswith("45"):
        from returnn.datasets.hdf import HDFDataset

        dataset = HDFDataset(files=[str(tmp_path / "out.hdf")])
        dataset.init_seq_order(epoch=1)
        dataset.load_seqs(0, dataset.num_seqs)
        assert dataset.num_seqs == 24 and dataset.get_data_keys() == ["data", "classes"]
        assert dataset.get_data(0, "classes").ndim == 1 and dataset.get_tag(0).startswith("seq-")
    else:
        written = eval((tmp_path / "search_out.py").read_text())
        assert len(written) == 24 and all(isinstance(text, str) for text in written.values())


def test_lengths_over_more_axes_than_the_batch_stop_with_what_to_do():
    """A RETURNN search marks [batch, beam, time] hypotheses with lengths per beam entry ([batch, beam]); seq_len here
    is one length per sequence of axis 1, so such lengths stop with a config error that says so (was a TypeError
    from numpy while the outputs were cut)."""
    from framework.base.errors import ConfigError
    from framework.core.run_ctx import RunCtx
    from framework.training.forward import OutputCollector

    run_ctx = RunCtx(stage="forward", epoch=1, step=0)
    run_ctx.mark_as_output(torch.zeros(2, 1, 5), "hyps", seq_len=torch.tensor([[3], [4]]))
    with pytest.raises(ConfigError, match=r"per-hypothesis lengths of a beam"):
        OutputCollector(None).add(np.array([0, 1]), run_ctx.outputs)
    fine = RunCtx(stage="forward", epoch=1, step=0)
    fine.mark_as_output(torch.zeros(2, 5), "hyps", seq_len=torch.tensor([3, 4]))
    collector = OutputCollector(None)
    collector.add(np.array([0, 1]), fine.outputs)
    assert [len(row) for row in collector.outputs["hyps"]] == [3, 4]
