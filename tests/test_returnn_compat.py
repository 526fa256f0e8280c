"""RETURNN users bring their configs: RETURNN's options and notation, its HDF and learning-rate files.

Checked against RETURNN itself (a test-only dependency): its HDFDataset reads our files, ours reads
files written by its SimpleHDFWriter, and each reads the other's learning_rate_file.
"""

from __future__ import annotations

import os
import subprocess

import numpy as np
import pytest

from conftest import run_rnn
from framework.datasets import Task12AXDataset
from framework.datasets.hdf import HDFDataset
from framework.training.checkpoint_cleanup import epochs_to_keep, milestones
from framework.training.lr_file import read_lr_file, write_lr_file

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEMO = os.path.join(ROOT, "tests", "returnn", "demo_torch.config")


def _rnn(*args: str, out: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, DEMO_OUT=out, OMP_NUM_THREADS="1")
    return run_rnn(*args, env=env, timeout=300)


def _returnn_hdf(path: str):
    from returnn.datasets.hdf import HDFDataset as ReturnnHDFDataset

    dataset = ReturnnHDFDataset(files=[path], use_cache_manager=False)
    dataset.initialize()
    dataset.init_seq_order(epoch=1)
    dataset.load_seqs(0, dataset.num_seqs)
    return dataset


@pytest.mark.slow
def test_returnn_demo_style_config_trains_decays_cleans_up_and_forwards_hdf_that_returnn_reads(tmp_path):
    out = str(tmp_path)
    train = _rnn(DEMO, "++num_epochs", "4", "++train", "{'class': 'Task12AXDataset', 'num_seqs': 300}", out=out)
    assert train.returncode == 0, train.stdout + train.stderr
    assert "WARNING" not in train.stdout + train.stderr

    from returnn.learning_rate_control import LearningRateControl

    control = LearningRateControl(default_learning_rate=0.01, filename=f"{out}/learning_rates")  # RETURNN reads ours
    assert sorted(control.epoch_data) == [1, 2, 3, 4]
    for epoch in (3, 4):  # newbob with RETURNN's learning_rate_decay = 0.9 and threshold 0.0
        old, new = (control.epoch_data[e].error["dev_loss_ce"] for e in (epoch - 2, epoch - 1))
        previous = control.epoch_data[epoch - 1].learning_rate
        expected = previous * 0.9 if (new - old) / abs(new) > 0.0 else previous  # RETURNN: relative to the new
        assert control.epoch_data[epoch].learning_rate == pytest.approx(expected)
    assert control.epoch_data[1].error["dev_loss_fer"] < 0.5
    kept = sorted(f for f in os.listdir(out) if f.endswith(".pt"))
    assert "model.004.pt" in kept and len(kept) < 4  # cleanup_old_models deleted some

    forward = _rnn(DEMO, "++task", "forward", "++forward_data", "dev", "++output_file", f"{out}/out.hdf", out=out)
    assert forward.returncode == 0, forward.stdout + forward.stderr
    theirs = _returnn_hdf(f"{out}/out.hdf")
    ours = HDFDataset(f"{out}/out.hdf")
    assert theirs.num_seqs == ours.num_seqs == 100
    lengths = [len(seq) for seq in Task12AXDataset(num_seqs=100, fixed_random_seed=1).arrays["data"]]
    for i in (0, 57, 99):
        assert theirs.get_data(i, "data").shape == (lengths[i], 2) == ours.get_seq(i)["data"].shape
        np.testing.assert_array_equal(theirs.get_data(i, "data"), ours.get_seq(i)["data"])
        assert theirs.get_tag(i) == ours.seq_tag(i)


def test_our_hdf_dataset_reads_returnns_simple_hdf_writer(tmp_path):
    from returnn.datasets.hdf import SimpleHDFWriter

    path = str(tmp_path / "returnn.hdf")
    rng = np.random.default_rng(0)
    lengths = [7, 3, 5]
    inputs = rng.standard_normal((3, 7, 4)).astype(np.float32)
    classes = rng.integers(0, 6, size=(3, 7)).astype(np.int32)
    writer = SimpleHDFWriter(path, dim=4, ndim=2, extra_type={"classes": (6, 1, "int32")})
    for i, (n, tag) in enumerate(zip(lengths, ["a/1", "b/2", "c/3"], strict=True)):  # one at a time: extras are not cut
        writer.insert_batch(inputs[i : i + 1, :n], [n], [tag], extra={"classes": classes[i : i + 1, :n]})
    writer.close()

    dataset = HDFDataset(path)
    assert dataset.num_seqs == 3
    info = dataset.key_info()
    assert info["data"]["shape"] == (None, 4) and info["data"]["sparse_dim"] is None
    assert info["classes"]["shape"] == (None,) and info["classes"]["sparse_dim"] == 6
    assert list(dataset.seq_lengths()) == lengths
    for i, n in enumerate(lengths):
        seq = dataset.get_seq(i)
        np.testing.assert_array_equal(seq["data"], inputs[i, :n])
        np.testing.assert_array_equal(seq["classes"], classes[i, :n])
    assert [dataset.seq_tag(i) for i in range(3)] == ["a/1", "b/2", "c/3"]
    batch = dataset.get_batch(np.array([0, 1]))
    assert batch["data"].shape == (2, 7, 4) and list(batch["classes:seq_len"]) == [7, 3]


def test_learning_rate_files_are_read_both_ways(tmp_path):
    from returnn.learning_rate_control import NewbobRelative

    theirs = NewbobRelative(default_learning_rate=0.1, relative_error_threshold=-0.01, filename=str(tmp_path / "r"))
    for epoch, (lr, ce) in enumerate([(0.1, 0.9), (0.05, float("nan"))], start=1):
        theirs.set_default_learning_rate_for_epoch(epoch, lr)
        theirs.set_epoch_error(epoch, {"dev_loss_ce": ce, "train_loss_ce": 1.0, "dev_score": 0.5})
    theirs.save()
    lrs, scores = read_lr_file(str(tmp_path / "r"))
    assert lrs == {1: 0.1, 2: 0.05}
    assert scores[1] == {"dev": {"ce": 0.9, "score": 0.5}, "train": {"ce": 1.0}} and np.isnan(scores[2]["dev"]["ce"])

    write_lr_file(str(tmp_path / "ours"), {1: 0.1, 2: 0.09}, {1: {"dev": {"ce": 0.7, "fer": 0.2}}})
    back = NewbobRelative(default_learning_rate=0.1, relative_error_threshold=-0.01, filename=str(tmp_path / "ours"))
    assert back.epoch_data[2].learning_rate == 0.09
    assert back.epoch_data[1].error == {"dev_loss_ce": 0.7, "dev_loss_fer": 0.2}
    (tmp_path / "bad").write_text("{1: print('x')}")
    with pytest.raises(Exception, match="RETURNN's format"):
        read_lr_file(str(tmp_path / "bad"))


def test_cleanup_keeps_returnns_last_best_and_milestone_epochs():
    assert milestones(10) == {4, 5, 8, 10}
    assert milestones(100) == {10, 20, 40, 80}
    scores = {
        e: {"dev": {"ce": ce, "same": 1.0}} for e, ce in zip(range(1, 10), [9, 3, 8, 7, 6, 2.5, 8, 9, 9], strict=True)
    }
    assert epochs_to_keep(list(range(1, 10)), scores, keep_last_n=2, keep_best_n=2, keep=None) == {2, 4, 5, 6, 8, 9}
    assert epochs_to_keep([1, 2], scores, keep_last_n=2, keep_best_n=4, keep=None) == {1, 2}
    assert epochs_to_keep(list(range(1, 10)), scores, keep_last_n=1, keep_best_n=0, keep=[1]) == {1, 9}


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("backend = 'tensorflow'", "RETURNN's TensorFlow and JAX backends are not supported"),
        ("use_horovod = True", "stops on use_horovod = True at startup (AssertionError"),
        ("default_float_dtype = 'int32'", "is not a torch floating-point dtype"),
        ("use_tensorflow = True", "RETURNN runs the config with its TensorFlow engine"),
        ("learning_rate_control = 'newbob_abs'", "must be one of"),
        ("batching = 'shuffle'", "batching = 'shuffle' is not one of"),
    ],
)
def test_returnn_options_that_are_not_honoured_are_refused(tmp_path, line, expected):
    config = tmp_path / "c.config"
    config.write_text(
        "train = {'class': 'Task12AXDataset', 'num_seqs': 20}\n"
        "def train_step(*, model, extern_data, **_): pass\n"
        "def get_model(**_):\n    import torch\n    return torch.nn.Linear(1, 1)\n"
        "num_inputs = 9  # read below: the config's own variable, not RETURNN's option\n"
        "_dim = num_inputs\n" + line + "\n"
    )
    result = _rnn(str(config), out=str(tmp_path))
    assert result.returncode == 2, result.stdout + result.stderr
    assert expected in result.stdout + result.stderr
    assert "num_inputs" not in (result.stdout + result.stderr).split("ERROR", 1)[-1]


def test_a_returnn_option_given_as_override_is_refused_with_advice(tmp_path):
    result = _rnn(DEMO, "++shuffle_frames_of_nseqs", "3", out=str(tmp_path))
    assert result.returncode == 2
    assert "++shuffle_frames_of_nseqs: a RETURNN option that changes the trained model" in result.stdout + result.stderr


def test_model_outputs_are_checked_against_the_marked_outputs():
    import torch

    from framework.core.run_ctx import RunCtx
    from framework.datasets.extern_data import parse_extern_data
    from framework.training.forward import check_outputs

    declared = parse_extern_data({"output": {"dim": 2}}, "model_outputs")
    run_ctx = RunCtx(stage="forward", epoch=1, step=0)
    run_ctx.mark_as_default_output(torch.zeros(3, 5, 2), seq_len=torch.tensor([5, 4, 1]))
    check_outputs(declared, run_ctx.outputs)
    for outputs, message in (
        ({"output": (torch.zeros(3, 5, 3), torch.tensor([5, 4, 1]))}, "declares"),
        ({"output": (torch.zeros(3, 5, 2), None)}, "seq_len=extern_data"),
        ({"logits": (torch.zeros(3, 5, 2), None)}, "marked the outputs"),
    ):
        run_ctx = RunCtx(stage="forward", epoch=1, step=0)
        for name, (tensor, seq_len) in outputs.items():
            run_ctx.mark_as_output(tensor, name, seq_len=seq_len)
        with pytest.raises(Exception, match=message):
            check_outputs(declared, run_ctx.outputs)


def test_a_forward_step_that_marks_nothing_is_handled_as_returnns_forward_with_callback():
    """RETURNN (returnn/torch/engine.py forward_with_callback) checks a step's outputs only where model_outputs is set
    (RunCtx.check_outputs_complete, run here); otherwise process_seq gets each sequence with the outputs marked, none
    too, and they may differ from step to step. Ours: the same with a forward_callback; the output file (not
    RETURNN's) needs outputs, and says so."""
    import torch
    from returnn.frontend import run_ctx as returnn_run_ctx
    from returnn.tensor import Dim, Tensor, TensorDict

    from framework.base.errors import ConfigError
    from framework.core.run_ctx import RunCtx
    from framework.datasets.extern_data import parse_extern_data
    from framework.training.forward import CallbackSink, OutputCollector

    feature = Dim(2, name="feature")
    expected = TensorDict({"output": Tensor("output", dims=[Dim(None, name="batch"), feature], dtype="float32")})
    for declared in (None, expected):
        returnn_run_ctx.init_forward_step_run_ctx(expected_outputs=declared, step=0, epoch=1)
        if declared is None:
            returnn_run_ctx.get_run_ctx().check_outputs_complete()  # nothing marked: accepted
        else:
            with pytest.raises(AssertionError, match="expected outputs"):
                returnn_run_ctx.get_run_ctx().check_outputs_complete()

    class Callback:
        def __init__(self):
            self.seen: list[tuple[str, list[str]]] = []

        def process_seq(self, *, seq_tag, outputs):
            self.seen.append((seq_tag, sorted(outputs.data)))  # RETURNN's TensorDict, as there

        def finish(self):
            self.seen.append(("finish", []))

    callback = Callback()
    sink = CallbackSink(callback, None, None)
    marked = RunCtx(stage="forward", epoch=1, step=1)
    marked.mark_as_output(torch.zeros(1, 2), "output")
    sink.add(np.array([0, 1]), RunCtx(stage="forward", epoch=1, step=0).outputs)
    sink.add(np.array([2]), marked.outputs)
    sink.add(np.array([3]), {})
    sink.write("forward_callback", [])
    assert callback.seen == [("seq-0", []), ("seq-1", []), ("seq-2", ["output"]), ("seq-3", []), ("finish", [])]
    declared = parse_extern_data({"output": {"dim": 2}}, "model_outputs")
    with pytest.raises(ConfigError, match="model_outputs declares"):
        CallbackSink(Callback(), declared, None).add(np.array([0]), {})
    with pytest.raises(ConfigError, match="forward_callback"):
        OutputCollector(None).add(np.array([0]), {})
