"""Real workloads: no host sync per step, mixed precision, torch.compile, a thread count that fits the machine."""

import os
import re
import subprocess
import sys

import numpy as np
import pytest
import torch
from torch import nn

from framework.assembly import Engine
from framework.base import log
from framework.base.config import Config
from framework.base.errors import ConfigError
from framework.base.host_syncs import HostSyncCounter
from framework.core.events import Event
from framework.debug.numerics import NonFiniteError
from framework.training.threads import choose_num_threads, cores_busy_with_others


@pytest.fixture(autouse=True)
def quiet_log():
    log.setup(verbosity=2)


class Boost(nn.Module):
    """Multiplies by a constant: 1e5 overflows float16 (max 65504)."""

    def __init__(self, factor: float):
        super().__init__()
        self.factor = factor

    def forward(self, x):
        return x * self.factor


def _train_step(*, model, extern_data, run_ctx, **_kwargs):
    logits = model(extern_data["data"])
    run_ctx.mark_as_loss(name="ce", loss=nn.functional.cross_entropy(logits, extern_data["classes"]))
    run_ctx.mark_as_loss(name="fer", loss=(logits.argmax(-1) != extern_data["classes"]).float().mean(), as_error=True)
    run_ctx.seen_dtype = logits.dtype


def _config(factor: float = 1.0, **overrides) -> Config:
    values = {
        "train": {"class": "GaussianClustersDataset", "split": "train", "num_seqs": 200, "dim": 4},
        "dev": {"class": "GaussianClustersDataset", "split": "test", "num_seqs": 40, "dim": 4},
        "batch_size": 8,
        "num_epochs": 1,
        "device": "cpu",
        "optimizer": {"class": "adam"},
        "learning_rate": 1e-2,
        "get_model": lambda **_: nn.Sequential(nn.Linear(4, 16), nn.Tanh(), Boost(factor), nn.Linear(16, 3)),
        "train_step": _train_step,
    }
    values.update(overrides)
    return Config.from_dict(values)


@pytest.mark.parametrize("tensorboard", [False, True])
def test_training_steps_with_default_options_never_wait_for_the_device(tmp_path, tensorboard):
    extra = {"tensorboard_dir": str(tmp_path / "tb")} if tensorboard else {}
    engine = Engine(_config(**extra))
    engine.init_train()
    engine.state.epoch = 1
    engine.train_epoch()  # the first steps' one-off checks
    engine.state.epoch = 2
    with HostSyncCounter() as syncs:
        engine.train_epoch()
    engine.callbacks.emit(Event.CLOSE, engine.state)
    assert engine.state.steps_in_epoch >= 20
    # The epoch's scores are read once at its end; nothing per step, TensorBoard included.
    assert syncs.count <= 2, syncs.calls


def test_the_counter_sees_what_waits_for_the_device():
    x = torch.ones(3)
    with HostSyncCounter() as syncs:
        float(x.sum()), x.tolist(), bool(x.all()), x.max().item()
    assert syncs.count == 4


def test_bfloat16_autocast_runs_train_and_eval_steps_in_low_precision():
    seen = []

    def train_step(*, model, extern_data, run_ctx, **_kwargs):
        _train_step(model=model, extern_data=extern_data, run_ctx=run_ctx)
        if extern_data["data"].device.type != "meta":  # the device check's dry run has no autocast
            seen.append((run_ctx.stage, run_ctx.seen_dtype))

    engine = Engine(_config(torch_amp="bfloat16", train_step=train_step))
    engine.run("train")
    assert {dtype for _, dtype in seen} == {torch.bfloat16} and {stage for stage, _ in seen} == {"train", "eval"}
    assert all(p.dtype == torch.float32 for p in engine.state.model.parameters())


def test_a_float16_overflow_stops_with_the_module_the_dtype_max_and_the_value_seen():
    engine = Engine(_config(factor=1e5, torch_amp="float16"))
    with pytest.raises(NonFiniteError) as error:
        engine.run("train")
    message = str(error.value)
    assert "first module whose output overflows float16 (max 65504): 2 (Boost), value seen" in message
    assert all(torch.isfinite(p).all() for p in engine.state.model.parameters())


def test_a_collapsing_loss_scale_is_logged_per_skipped_step_then_named(capsys):
    log.setup(verbosity=5)
    engine = Engine(_config(torch_amp={"dtype": "float16", "grad_scaler": {"init_scale": 1e30}}))
    engine.run("train")
    out = capsys.readouterr().out
    assert "gradients overflowed at loss scale 1e+30; update skipped" in out
    assert "WARNING the loss scale keeps collapsing: 10 updates in a row were skipped" in out
    assert "modules that differ most from the same module run in float32" in out
    assert engine.state.loss_scale.item() < 1e30


def test_bad_mixed_precision_options_are_config_errors():
    with pytest.raises(ConfigError, match="use 'bfloat16' or 'float16'"):
        Engine(_config(torch_amp="float8"))
    with pytest.raises(ConfigError, match="grad_scaler"):
        Engine(_config(torch_amp={"dtype": "float16", "grad_scaler": {"init": 3}})).init_train()


@pytest.mark.slow  # seconds of work: the full suite runs it, the fast subset does not
def test_compiled_and_eager_runs_resume_from_each_other(tmp_path):
    prefix = str(tmp_path / "model")
    compiled = {"torch_compile": {"backend": "aot_eager"}, "model": prefix}
    first = Engine(_config(**compiled))
    first.run("train")
    assert type(first.state.step_model).__name__ == "OptimizedModule"
    Engine(_config(model=prefix, num_epochs=2)).run("train")
    third = Engine(_config(**compiled, num_epochs=3))
    third.run("train")
    assert third.state.epoch == 3 and sorted(n for n in os.listdir(tmp_path) if n.endswith(".pt"))[:3] == [
        "model.001.pt",
        "model.002.pt",
        "model.003.pt",
    ]


def test_compile_stays_eager_and_says_why_for_diagnostics_that_hook_every_step(capsys):
    log.setup(verbosity=3)
    engine = Engine(_config(torch_compile=True, debug_add_check_numerics_on_output=True))
    engine.run("train")
    assert "the run stays eager because debug_add_check_numerics_on_output" in capsys.readouterr().out
    assert isinstance(engine.state.step_model, nn.Sequential)


def test_thread_count_is_explicit_or_fits_the_machine(monkeypatch):
    assert choose_num_threads(3) == (3, "torch_num_threads")
    monkeypatch.setenv("OMP_NUM_THREADS", "2")
    assert choose_num_threads("auto") == (2, "OMP_NUM_THREADS")
    monkeypatch.delenv("OMP_NUM_THREADS")
    threads, why = choose_num_threads("auto")
    assert 1 <= threads <= len(os.sched_getaffinity(0)) and "CPU" in why
    with pytest.raises(ConfigError, match="torch_num_threads"):
        choose_num_threads(0)


def test_a_core_kept_busy_by_another_process_is_seen():
    busy = subprocess.Popen(
        [sys.executable, "-c", "print('spinning', flush=True)\nwhile True: pass"], stdout=subprocess.PIPE
    )
    try:
        assert busy.stdout.readline() == b"spinning\n"
        assert cores_busy_with_others() >= 0.5
    finally:
        busy.kill()
        busy.wait()


def test_memory_mapped_and_flat_ragged_data_train_like_in_memory_lists(tmp_path):
    from framework.datasets.numpy_dataset import NumpyDataset

    rng = np.random.default_rng(0)
    lengths = rng.integers(1, 6, size=40)
    seqs = [rng.normal(size=(n, 3)).astype(np.float32) for n in lengths]
    labels = rng.integers(0, 4, size=40)
    np.save(tmp_path / "values.npy", np.concatenate(seqs))
    np.save(tmp_path / "offsets.npy", np.concatenate([[0], np.cumsum(lengths)]))
    np.save(tmp_path / "labels.npy", labels)
    mapped = NumpyDataset(
        {
            "data": {"values": str(tmp_path / "values.npy"), "offsets": str(tmp_path / "offsets.npy")},
            "classes": str(tmp_path / "labels.npy"),
        },
        sparse_dims={"classes": 4},
    )
    in_memory = NumpyDataset({"data": seqs, "classes": labels}, sparse_dims={"classes": 4})
    assert isinstance(mapped.arrays["classes"], np.memmap)
    assert np.array_equal(mapped.seq_lengths(), in_memory.seq_lengths())
    batch, expected = mapped.get_batch(np.array([3, 0, 7])), in_memory.get_batch(np.array([3, 0, 7]))
    assert all(np.array_equal(batch[k], expected[k]) for k in expected)
    assert mapped.find_value_outside("classes", 0, 3) == in_memory.find_value_outside("classes", 0, 3)
    assert np.array_equal(mapped.value_counts("classes", 4), in_memory.value_counts("classes", 4))
    frame_labels = [rng.integers(0, 5, size=n) for n in lengths]
    ragged = NumpyDataset(
        {"labels": {"values": np.concatenate(frame_labels), "offsets": np.load(tmp_path / "offsets.npy")}}
    )
    listed = NumpyDataset({"labels": frame_labels})
    assert ragged.find_value_outside("labels", 0, 4) == listed.find_value_outside("labels", 0, 4) is not None
    assert np.array_equal(ragged.value_counts("labels", 5), listed.value_counts("labels", 5))


def test_ragged_offsets_that_do_not_fit_the_values_are_a_config_error():
    from framework.datasets.numpy_dataset import NumpyDataset

    with pytest.raises(ConfigError, match="offsets must be 1-d, start at 0 and end at the number of rows"):
        NumpyDataset({"data": {"values": np.zeros((5, 2)), "offsets": np.array([0, 2, 4])}})


def test_the_float32_comparison_is_not_fooled_by_an_in_place_op_after_a_module(capsys):
    log.setup(verbosity=2)
    model = lambda **_: nn.Sequential(nn.Linear(4, 16), nn.ReLU(inplace=True), nn.Linear(16, 3))  # noqa: E731
    Engine(_config(torch_amp="bfloat16", debug_amp_check=True, get_model=model)).run("train")
    out = capsys.readouterr().out
    differences = [float(d) for d in re.findall(r"relative difference (\S+) \(output dtype bfloat16\)", out)]
    assert len(differences) == 3 and max(differences) < 0.05, out  # bfloat16 rounding, not ReLU's overwrite
