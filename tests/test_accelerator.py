"""The accelerator paths, run on a device: the emulated one (``tests/emulated_accelerator.py``) by default,
a real one with ``FRAMEWORK_TEST_ACCELERATOR=cuda`` (``tools/check-accelerator.py --device cuda``).

Every run happens in a child process: the emulator, once installed, is the process's accelerator
(``device = "auto"`` would pick it), so the test process itself never installs it. The module is
also the child's script for the in-process measurements (``python tests/test_accelerator.py ...``).
"""

from __future__ import annotations

import collections
import json
import os
import re
import sys

import pytest
import torch

TESTS = os.path.dirname(os.path.abspath(__file__))
ACCELERATOR = os.environ.get("FRAMEWORK_TEST_ACCELERATOR", "emu")
EMULATED = ACCELERATOR == "emu"
# Appended to a config: the device of the run (installing the emulator in the run's process when it is asked for).
DEVICE_PRELUDE = f"""
import sys as _sys
_sys.path.insert(0, {TESTS!r})
if {EMULATED!r}:
    import emulated_accelerator
    emulated_accelerator.install()
device = {ACCELERATOR!r}
"""


def _config(directory, base: str, extra: str = "") -> str:
    from conftest import write_config

    with open(os.path.join(TESTS, "data", base), encoding="utf-8") as f:
        return write_config(directory, f.read() + DEVICE_PRELUDE + extra)


def _rnn(*args: str):
    from conftest import run_rnn

    return run_rnn(*args, timeout=300)


def run_script(*args: str, timeout: float):
    from conftest import run_script

    return run_script(*args, timeout=timeout)


def _trained_state(path: str) -> dict[str, torch.Tensor]:
    """A checkpoint's parameters and optimizer state, by name."""
    saved = torch.load(path, map_location="cpu", weights_only=True)
    state = {f"model.{name}": value for name, value in saved["model"].items()}
    for index, entries in saved["optimizer"]["state"].items():
        state.update({f"optimizer.{index}.{name}": value for name, value in entries.items()})
    return state


@pytest.mark.slow
def test_training_eval_forward_and_a_resume_run_on_the_device(tmp_path):
    config = _config(tmp_path, "tiny_config.py")
    whole, resumed = str(tmp_path / "whole" / "model"), str(tmp_path / "resumed" / "model")
    run = _rnn(config, "++model", whole, "++torch_log_memory_usage", "True", "++log_verbosity", "5")
    assert run.returncode == 0, run.stderr
    assert f"parameters, on {ACCELERATOR}" in run.stdout
    assert re.search(r"^Epoch 2 evaluation: dev: ce \d", run.stdout, re.MULTILINE), run.stdout[-2000:]
    if EMULATED:  # memory logging's fallback: the emulator keeps no memory statistics
        assert "the emu backend keeps no memory statistics" in run.stdout and "mem_usage:rss" in run.stdout
    else:
        assert f"mem_usage:{ACCELERATOR}" in run.stdout
    # Resume: one epoch, then a second run continues it; its checkpoint (parameters and Adam's state) equals the
    # uninterrupted run's, bit for bit.
    assert _rnn(config, "++model", resumed, "++num_epochs", "1").returncode == 0
    second = _rnn(config, "++model", resumed)
    assert second.returncode == 0, second.stderr
    expected, got = _trained_state(f"{whole}.002.pt"), _trained_state(f"{resumed}.002.pt")
    assert expected.keys() == got.keys() and any(k.startswith("optimizer.") for k in expected)
    assert [k for k in expected if not torch.equal(expected[k], got[k])] == []
    forward = _rnn(config, "++model", whole, "++task", "forward", "++forward_data", "dev")
    assert forward.returncode == 0, forward.stderr
    assert os.path.exists(f"{whole}.002.forward.npz")


@pytest.mark.slow
def test_loss_scaling_skips_an_update_and_a_nan_is_stopped_and_replayed_on_the_device(tmp_path):
    config = _config(tmp_path, "tiny_config.py", "batch_size = 8\nnum_epochs = 1\nlog_verbosity = 5\n")
    amp = "{'dtype': 'float16', 'grad_scaler': {'init_scale': 1e30}}"
    scaled = _rnn(config, "++torch_amp", amp, "++model", str(tmp_path / "amp" / "model"))
    assert scaled.returncode == 0, scaled.stderr
    assert "update skipped, scale now" in scaled.stdout
    assert "the loss scale keeps collapsing" in scaled.stdout  # the replay under autocast names where it overflows
    os.makedirs(tmp_path / "nan")
    nan_config = _config(tmp_path / "nan", "numerics_config.py")
    stopped = _rnn(nan_config, "++plant", "'forward_log'", "++model", str(tmp_path / "nan" / "model"))
    assert stopped.returncode == 1, stopped.stderr
    assert "non-finite while its inputs are finite: encoder.layers.0.act (Act)" in stopped.stderr  # the replay
    assert "Stopped before the optimizer step" in stopped.stderr
    # The saved step, replayed by the tool in a new process (batch and RNG state put back on the device).
    replay = run_script(
        os.path.join(os.path.dirname(TESTS), "tools", "replay-step.py"),
        nan_config,
        "++plant",
        "forward_log",
        str(tmp_path / "nan" / "model.nonfinite.ep002.step10.pt"),
        timeout=300,
    )
    assert replay.returncode == 1 and "encoder.layers.0.act (Act)" in replay.stdout, replay.stderr
    saved = _trained_state(str(tmp_path / "nan" / "model.001.pt"))
    assert all(torch.isfinite(v).all() for v in saved.values())


def test_a_tensor_created_without_a_device_fails_on_the_device_with_the_check_naming_it(tmp_path):
    stray = (
        "\ndef train_step(*, model, extern_data, run_ctx, **_kwargs):\n"
        "    logits = model(extern_data['data']) + torch.randn(3)  # a GPU bug: the noise is made on the CPU\n"
        "    run_ctx.mark_as_loss(name='ce', loss=nn.functional.cross_entropy(logits, extern_data['classes']))\n"
        "import torch\n"
    )
    result = _rnn(_config(tmp_path, "tiny_config.py", stray), "++model", str(tmp_path / "model"))
    assert result.returncode != 0
    # As on a GPU: the mix fails in the user's line, and the device check has named the tensor and where it was made.
    assert "Expected all tensors to be on the same device, but found at least two devices" in result.stderr
    assert re.search(r'config\.py", line \d+, in train_step', result.stderr)
    assert "device bug in module (train_step): aten.add at" in result.stdout
    assert "a tensor on cpu [3] that was created by aten.randn at" in result.stdout


def test_host_syncs_per_step_are_at_most_one_and_tensorboard_adds_none(tmp_path):
    result = run_script(__file__, "host-syncs", str(tmp_path / "tb"), timeout=300)
    assert result.returncode == 0, result.stderr
    counts = json.loads(result.stdout.splitlines()[-1])
    plain, tensorboard = counts["plain"], counts["tensorboard"]
    steps = plain["steps"]
    assert steps >= 10 and tensorboard["steps"] == steps
    # At most one wait per step (the epoch's scores are read once at its end), TensorBoard's values included.
    assert plain["count"] <= steps + 2, plain["calls"]
    assert tensorboard["count"] == plain["count"], (plain["calls"], tensorboard["calls"])
    assert all(".py:" in site for site in plain["calls"])  # each named by its call site
    counter = counts["counter"]
    # The emulator lacks pinned memory, events and memory statistics (the fallbacks run); a GPU has them.
    assert [counter[f] for f in ("pinned memory", "events", "memory statistics")] == [not EMULATED] * 3
    if EMULATED:  # the counter sees what the device truly waited for: the emulator's own record agrees
        assert plain["count"] == plain["emulated"] and tensorboard["count"] == tensorboard["emulated"]
        assert any("numerics.py" in site for site in plain["calls"])  # the lagged flag's read, without events
        assert plain["copies"].get("host->device blocking", 0) == 0  # batches are copied asynchronously
    else:  # pinned memory behind an event: the lagged flag costs no wait
        assert plain["count"] <= 2, plain["calls"]
    assert counter["seen"] == counter["expected"], counter
    assert counter["lengths"] == 0  # the :seq_len lengths live on the CPU by design


# -- the child process's side ---------------------------------------------------------------------------------------


def _measure(log_dir: str | None) -> dict:
    from torch import nn

    from framework.assembly import Engine
    from framework.base import log
    from framework.base.config import Config
    from framework.base.host_syncs import HostSyncCounter
    from framework.core.events import Event

    def train_step(*, model, extern_data, run_ctx, **_kwargs):
        logits = model(extern_data["data"])
        run_ctx.mark_as_loss(name="ce", loss=nn.functional.cross_entropy(logits, extern_data["classes"]))

    log.setup(verbosity=2)
    values = {
        "train": {"class": "GaussianClustersDataset", "split": "train", "num_seqs": 200, "dim": 4},
        "batch_size": 8,
        "num_epochs": 2,
        "device": ACCELERATOR,
        "optimizer": {"class": "adam"},
        "learning_rate": 1e-2,
        "get_model": lambda **_: nn.Sequential(nn.Linear(4, 16), nn.Tanh(), nn.Linear(16, 3)),
        "train_step": train_step,
        "tensorboard_dir": log_dir,
    }
    engine = Engine(Config.from_dict(values))
    engine.init_train()
    engine.state.epoch = 1
    engine.train_epoch()  # the first steps' one-off checks
    engine.state.epoch = 2
    emulated, copies = _emulator_syncs(), _emulator_copies()
    with HostSyncCounter(engine.state.device) as syncs:
        engine.train_epoch()
    emulated, copies = _emulator_syncs() - emulated, _emulator_copies() - copies
    engine.callbacks.emit(Event.CLOSE, engine.state)
    return {
        "steps": engine.state.steps_in_epoch,
        "count": syncs.count,
        "calls": dict(syncs.calls),
        "emulated": emulated,
        "copies": dict(copies),
    }


def _emulator_syncs() -> int:
    return sum(sys.modules["emulated_accelerator"].SYNCS.values()) if EMULATED else 0


def _emulator_copies() -> collections.Counter:
    return collections.Counter(sys.modules["emulated_accelerator"].COPIES) if EMULATED else collections.Counter()


def _counter_cases() -> dict:
    """What the counter sees: one sync for each data-dependent op and device->host copy; none for CPU lengths."""
    from framework.base.accelerator import has_events, has_pinned_memory, memory_stats
    from framework.base.host_syncs import HostSyncCounter

    x = torch.randn(6, 4).to(ACCELERATOR)
    lengths = torch.tensor([3, 2, 1])
    with HostSyncCounter(x.device) as syncs:
        x[x > 0], x.nonzero(), torch.unique(x), torch.masked_select(x, x > 1), x.cpu(), x.sum().item()
        if has_pinned_memory(x.device.type):  # (a backend without pinned memory refuses the copy)
            x.to("cpu", non_blocking=True)  # asynchronous: no wait
    with HostSyncCounter(x.device) as on_cpu:
        lengths.max().item(), lengths.tolist(), lengths.nonzero()
    features = {
        "pinned memory": has_pinned_memory(x.device.type),
        "events": has_events(x.device.type),
        "memory statistics": memory_stats(x.device) is not None,
    }
    return {"seen": syncs.count, "expected": 6, "lengths": on_cpu.count, "calls": dict(syncs.calls), **features}


if __name__ == "__main__" and sys.argv[1:2] == ["host-syncs"]:
    sys.path.insert(0, os.path.dirname(TESTS))
    if EMULATED:
        import emulated_accelerator

        emulated_accelerator.install()
    print(json.dumps({"plain": _measure(None), "tensorboard": _measure(sys.argv[2]), "counter": _counter_cases()}))
