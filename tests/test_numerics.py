"""NaN/Inf detection and localization, intentional infinities, skipped updates, replay."""

import os
import re
import shlex
import subprocess
import sys

import pytest
import torch

from conftest import ROOT, run_rnn, run_script
from framework.assembly import Engine
from framework.base import log
from framework.base.config import load_config
from framework.core.events import Callbacks, Event
from framework.debug.numerics import NonFiniteError

CONFIG = os.path.join(ROOT, "tests", "data", "numerics_config.py")


@pytest.fixture(autouse=True)
def quiet_log():
    log.setup(verbosity=2)


def _train(**overrides) -> Engine:
    engine = Engine(load_config([CONFIG], overrides))
    engine.run("train")
    return engine


def _fails(**overrides) -> str:
    with pytest.raises(NonFiniteError) as info:
        _train(**overrides)
    return str(info.value)


@pytest.mark.slow
def test_nan_in_a_submodule_is_named_and_stopped_before_damage(tmp_path):
    prefix = str(tmp_path / "model")
    result = run_rnn(CONFIG, "++plant", "'forward_log'", "++model", prefix)
    assert result.returncode == 1
    message = result.stderr
    assert "first module whose output is non-finite while its inputs are finite: encoder.layers.0.act (Act)" in message
    assert re.search(
        r"op aten\.log in module encoder\.layers\.0\.act\n +at .*numerics_config\.py:\d+ in forward: "
        r"return torch\.log\(x - 0\.5\)",
        message,
    )
    assert "batch entries with non-finite values: 16 of 16, dataset sequence indices" in message
    assert "Stopped before the optimizer step" in message and "model.001.pt) is intact" in message
    # The last checkpoint and the saved step hold finite parameters.
    checkpoint = torch.load(f"{prefix}.001.pt", weights_only=True)
    saved = torch.load(f"{prefix}.nonfinite.ep002.step10.pt", weights_only=True)
    for state in (checkpoint["model"], saved["model"]):
        assert all(torch.isfinite(v).all() for v in state.values())
    assert saved["batch"]["data"].shape == (16, 4) and len(saved["seq_indices"]) == 16
    # The printed replay command, copied as it is (overrides included), reproduces the diagnosis;
    # with the bug removed the step is clean.
    printed = message.split("replay it with:\n", 1)[1].splitlines()[0].split()
    assert printed[0] == "framework-replay-step" and "++plant" in printed  # installed: no checkout needed
    command = os.path.join(os.path.dirname(sys.executable), printed[0])  # this environment's installed command
    replay = subprocess.run(
        [command, *shlex.split(" ".join(printed[1:]))], capture_output=True, text=True, timeout=120, cwd=ROOT
    )
    assert replay.returncode == 1 and "encoder.layers.0.act (Act)" in replay.stdout
    clean = run_script(os.path.join(ROOT, "tools", "replay-step.py"), CONFIG, f"{prefix}.nonfinite.ep002.step10.pt")
    assert clean.returncode == 0 and "no non-finite values occurred in the replay" in clean.stdout


def test_parameters_stay_finite_in_process():
    engine = Engine(load_config([CONFIG], {"plant": "forward_log"}))
    with pytest.raises(NonFiniteError):
        engine.run("train")
    assert engine.state.epoch == 2 and engine.state.step_in_epoch == 0
    assert all(torch.isfinite(p).all() for p in engine.state.model.parameters())


def test_inf_created_only_in_backward_names_the_parameter_and_the_backward_op():
    message = _fails(plant="backward_sqrt", debug_add_check_numerics_on_output=True)
    assert "first parameter whose gradient is non-finite: encoder.layers.1.gate.gain" in message
    assert "op aten.div in module encoder.layers.1.gate" in message
    assert re.search(
        r"in SqrtBackward0, the gradient of sqrt at .*numerics_config\.py:\d+ in forward: "
        r"return x \* torch\.sqrt\(self\.gain\)",
        message,
    )
    assert "forward: first" not in message


def test_a_finite_loss_with_non_finite_gradients_is_not_blamed_on_the_next_steps_forward():
    """The default check reads the losses only: step 0's Inf gradient (finite loss) reaches the update, step 1's loss
    is NaN. The report must not call the parameters untouched nor blame the module that uses them."""
    message = _fails(plant="backward_sqrt")
    assert "global step 1" in message and "the parameters were non-finite already" in message
    assert "parameters non-finite before this step: encoder.layers.0.gate.gain, encoder.layers.1.gate.gain" in message
    assert "untouched" not in message and "first module" not in message
    assert "rerun with debug_add_check_numerics_on_output = True" in message


def test_ops_mode_names_the_aten_op_and_the_config_line():
    message = _fails(plant="loss_log", debug_add_check_numerics_ops=True)
    assert re.search(
        r"op aten\.log\n +at .*numerics_config\.py:\d+ in train_step: ce = ce \+ torch\.log\(ce - 100\.0\)", message
    )
    assert "non-finite losses: ce = nan" in message


@pytest.mark.parametrize("flag", ["debug_add_check_numerics_on_output", "debug_add_check_numerics_ops"])
def test_intentional_infinities_are_reported_unless_skipped_or_nan_only(flag):
    message = _fails(plant="mask", **{flag: True})
    assert "aten.masked_fill in module encoder.layers.0.mask" in message
    assert (
        _train(plant="mask", debug_check_numerics_skip_modules=["encoder.layers.*.mask"], **{flag: True}).state.epoch
        == 2
    )
    assert _train(plant="mask", debug_check_numerics_nan_only=True, **{flag: True}).state.epoch == 2


@pytest.mark.parametrize("flag", ["debug_add_check_numerics_on_output", "debug_add_check_numerics_ops"])
def test_a_mask_of_the_lowest_finite_float_is_replayed_once_and_not_reported(capsys, flag):
    """Hugging Face masks hold finfo.min: finite values whose float32 sums overflow. The first flagged step is
    replayed exactly (clean); later training and evaluation steps are neither replayed nor reported."""
    log.setup(verbosity=2)
    assert _train(plant="finfo_mask", **{flag: True}).state.epoch == 2
    out = capsys.readouterr().out
    assert out.count("the exact replay of the step is clean") == 1 and "WARNING" not in out, out


def test_invalid_updates_are_skipped_up_to_the_allowed_count_then_training_stops(capsys):
    log.setup(verbosity=2)
    message = _fails(plant="forward_log", num_allowed_consec_invalid_gradient_steps=3)
    out = capsys.readouterr().out
    assert [int(n) for n in re.findall(r"update skipped \((\d) of 3 allowed", out)] == [1, 2, 3]
    assert "after 3 skipped updates" in message and "encoder.layers.0.act (Act)" in message


@pytest.mark.parametrize("micro_batch", [0, 1])
def test_a_bad_micro_batch_skips_the_update_of_its_accumulation_window(capsys, micro_batch):
    """Window (12, 13) of accum_grad_multiple_step = 2 has one non-finite micro-batch, the first or the last: the
    window's update is skipped (the parameters stay as they were), and training goes on with the next window."""
    log.setup(verbosity=2)
    params_after: dict[int, list[torch.Tensor]] = {}

    def keep(state):
        params_after[state.global_step - 1] = [p.detach().clone() for p in state.model.parameters()]

    callbacks = Callbacks()
    callbacks.on(Event.STEP_END, keep, owner="test")
    overrides = dict(plant="step_log", plant_step=12 + micro_batch, accum_grad_multiple_step=2)
    engine = Engine(load_config([CONFIG], {**overrides, "num_allowed_consec_invalid_gradient_steps": 1}), callbacks)
    engine.run("train")
    assert engine.state.epoch == 2 and "update skipped (1 of 1 allowed" in capsys.readouterr().out
    unchanged = [torch.equal(a, b) for a, b in zip(params_after[11], params_after[13], strict=True)]
    changed = [torch.equal(a, b) for a, b in zip(params_after[13], params_after[15], strict=True)]
    assert all(unchanged) and not any(changed)
    assert all(torch.isfinite(p).all() for p in engine.state.model.parameters())


def test_checks_pass_on_a_healthy_model_with_every_flag():
    engine = _train(debug_add_check_numerics_on_output=True, debug_add_check_numerics_ops=True)
    assert engine.state.epoch == 2 and engine.state.global_step == 20


def test_nan_in_the_input_data_is_blamed_on_the_batch(tmp_path):
    config = os.path.join(tmp_path, "cfg.py")
    with open(config, "w") as f:
        f.write(
            open(CONFIG).read()
            + (
                "\nimport numpy as np\n_x = np.random.default_rng(0).normal(size=(32, 4)).astype('float32')\n_x[5, 2] = np.nan\n"
                "train = {'class': 'NumpyDataset', 'arrays': {'data': _x, 'classes': np.arange(32) % 3}, 'seq_ordering': 'default'}\n"
                # as if the NaN came later than the batches the sanity check looks at (that check: test_health.py)
                "debug_sanity_check = False\n"
            )
        )
    engine = Engine(load_config([config]))
    with pytest.raises(NonFiniteError) as info:
        engine.run("train")
    assert "the batch itself has non-finite values in 'data'" in str(info.value)
    assert "1 of 16, dataset sequence indices 5" in str(info.value)
