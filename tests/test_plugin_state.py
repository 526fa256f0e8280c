"""Plugin state in checkpoints: a run stopped and resumed continues every plugin where it was (the float16
loss scaler, the learning watches, the numerics guard's count), also across an older checkpoint or a plugin
turned off since."""

from __future__ import annotations

import pytest
import torch

from conftest import TINY_CONFIG
from framework.assembly import Engine
from framework.base.config import load_config
from framework.base.errors import TrainingInterrupted
from framework.core.events import Event
from framework.debug.numerics import NonFiniteError
from framework.testing import bitwise_equal
from framework.training import checkpoint

# The scale grows every 2 clean steps and halves on each overflow: it moves all through the run.
FLOAT16 = {"torch_amp": {"dtype": "float16", "grad_scaler": {"growth_interval": 2}}}
INIT_SCALE = 2.0**16  # torch.amp.GradScaler's default


def _engine(tmp_path, stop_at: int | None = None, **overrides) -> Engine:
    """A tiny training run (3 epochs of 10 steps) writing checkpoints; stopped after global step ``stop_at``
    as Ctrl-C would (an interrupted checkpoint), or not."""
    values = {"model": str(tmp_path / "model"), "num_epochs": 3, "debug_loss_window": 3, **overrides}
    if stop_at is not None:
        values["callbacks"] = {"step_end": lambda state: state.global_step == stop_at and state.control.stop("test")}
    return Engine(load_config([TINY_CONFIG], values))


def _plugin(engine: Engine, name: str):
    return next(plugin for plugin in engine.plugins if plugin.name == name)


def _scaler_state(engine: Engine) -> tuple[torch.Tensor, torch.Tensor]:
    scaler = _plugin(engine, "GradScaling")
    return scaler.scale.clone(), scaler.growth_tracker.clone()


def _states(engine: Engine) -> dict:
    return {plugin.name: plugin.state_dict() for plugin in engine.plugins if plugin.state_dict() is not None}


def test_a_float16_run_stopped_mid_epoch_resumes_with_the_scale_and_every_plugin_where_they_were(tmp_path):
    reference = _engine(tmp_path / "ref", **FLOAT16)
    reference.run("train")

    # After global step 14: mid-epoch 2, mid-window of the loss watch (whose epoch sums then start at step 12).
    stopped = _engine(tmp_path / "run", stop_at=14, **FLOAT16)
    with pytest.raises(TrainingInterrupted):
        stopped.run("train")
    at_stop = _scaler_state(stopped)
    assert at_stop[0].item() != INIT_SCALE  # what a resume without the scaler's state would start from
    assert _plugin(stopped, "LossWindowWatch").state_dict()["base"] is not None

    resumed = _engine(tmp_path / "run", **FLOAT16)
    at_resume = []
    resumed.callbacks.on(Event.STARTUP, lambda state: at_resume.append(_scaler_state(resumed)))
    resumed.run("train")
    assert bitwise_equal(at_resume, [at_stop])  # at its start

    assert bitwise_equal(_states(resumed), _states(reference))  # scaler, learning watches, numerics guard
    assert {"GradScaling", "LossWindowWatch", "DevDivergenceWatch", "NumericsGuard"} <= _states(reference).keys()
    final = [checkpoint.load_checkpoint(str(path / "model.003.pt")) for path in (tmp_path / "ref", tmp_path / "run")]
    assert bitwise_equal(final[0]["model"], final[1]["model"]) and bitwise_equal(
        final[0]["plugins"], final[1]["plugins"]
    )


def _nan_at(steps: set[int]):
    """A train_step whose optimized loss is NaN at the global ``steps``."""

    def train_step(*, model, extern_data, run_ctx, **_kwargs):
        logits = model(extern_data["data"])
        loss = torch.nn.functional.cross_entropy(logits, extern_data["classes"])
        run_ctx.mark_as_loss(name="ce", loss=loss * float("nan") if run_ctx.step in steps else loss)

    return train_step


def test_the_numerics_guard_counts_invalid_updates_across_a_resume(tmp_path):
    bad = {"train_step": _nan_at({5, 6, 7}), "num_allowed_consec_invalid_gradient_steps": 2, "num_epochs": 1}
    with pytest.raises(NonFiniteError, match=r"\(global step 7\) after 2 skipped updates") as uninterrupted:
        _engine(tmp_path / "ref", **bad).run("train")
    assert "training step 7 of epoch 1" in str(uninterrupted.value)

    # Stopped after step 6, whose verdict is still on its way: the checkpoint counts it (steps 5 and 6) ...
    stopped = _engine(tmp_path / "run", stop_at=7, **bad)
    with pytest.raises(TrainingInterrupted):
        stopped.run("train")
    saved = checkpoint.load_checkpoint(str(tmp_path / "run" / "model.interrupted.pt"))
    assert saved["plugins"]["NumericsGuard"] == {"consecutive_invalid": 2}
    # ... so the resumed run's step 7 is the third invalid update in a row, as in the uninterrupted run.
    with pytest.raises(NonFiniteError, match=r"\(global step 7\) after 2 skipped updates"):
        _engine(tmp_path / "run", **bad).run("train")


def test_an_older_checkpoint_resumes_with_fresh_plugins_and_the_state_of_a_plugin_now_off_is_ignored(
    tmp_path,
    output,  # noqa: F811
):
    _engine(tmp_path, num_epochs=2, **FLOAT16).run("train")
    path = str(tmp_path / "model.002.pt")
    saved = checkpoint.load_checkpoint(path)
    assert saved["plugins"]["GradScaling"]["scale"].item() != INIT_SCALE
    older = {key: value for key, value in saved.items() if key != "plugins"}
    checkpoint.save_checkpoint(path, older)
    resumed = _engine(tmp_path, num_epochs=3, **FLOAT16)
    at_resume = []
    resumed.callbacks.on(Event.STARTUP, lambda state: at_resume.append(_plugin(resumed, "GradScaling").scale.item()))
    resumed.run("train")
    assert at_resume == [INIT_SCALE]  # fresh, as before checkpoints held plugin states

    output()
    _engine(tmp_path, num_epochs=4, torch_amp=None).run("train")  # no float16 now: no scaler
    log = output()
    assert f"Checkpoint {tmp_path}/model.003.pt: the saved state of plugin GradScaling is not used" in log
    assert "Resuming from" in log
