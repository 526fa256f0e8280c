"""The plugin seam: a diagnostic in one file, ordered callbacks, CLOSE however a run ends, every task's
step events, one step runner, scores keyed by (dataset, loss)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
import torch
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
from test_health import _memorizable, _train, _wide, output  # noqa: F401  (output is a fixture)
from torch import nn

from conftest import ROOT, TINY_CONFIG, run_rnn, tiny_config_with
from framework import options
from framework.config import load_config
from framework.core.engine import Engine
from framework.core.events import Callbacks, Event, Order, StopTraining
from framework.errors import ConfigError, TrainingInterrupted

EXAMPLES = os.path.join(ROOT, "docs", "examples")
USE_EXAMPLE = f"\nimport sys\nsys.path.insert(0, {EXAMPLES!r})\nplugins = ['dead_relu']\n"
DEAD_MODEL = (
    "\ndef get_model(*, epoch, step, **_kwargs):\n"
    "    first = nn.Linear(4, hidden)\n"
    "    nn.init.constant_(first.bias, -100.0)  # every input lands below zero: the ReLU after it is dead\n"
    "    return nn.Sequential(first, nn.ReLU(), nn.Linear(hidden, 3))\n"
)


@pytest.fixture(autouse=True)
def _registry_restored():
    """A plugin imported in-process registers its options for the whole process: forget them after each test."""
    saved = {option.name: option for option in options.all_options()}  # all_options reads the built-in ones first
    yield
    options._REGISTRY.clear()
    options._REGISTRY.update(saved)
    sys.modules.pop("dead_relu", None)


def test_the_documented_example_plugin_names_a_dead_relu_and_stays_quiet_on_a_healthy_model(tmp_path, output):  # noqa: F811
    dead = load_config([tiny_config_with(tmp_path, USE_EXAMPLE + DEAD_MODEL)], {"debug_dead_relu_interval": 5})
    Engine(dead).train()
    warnings = [line for line in output().splitlines() if "dead ReLU" in line]
    assert warnings == ["WARNING dead ReLU: '1' output only zeros in training step 0."]  # once, with the layer
    healthy = load_config([tiny_config_with(tmp_path, USE_EXAMPLE)], {"debug_dead_relu_interval": 5})
    Engine(healthy).train()
    assert "dead ReLU" not in output()


def test_a_plugins_options_are_validated_like_the_frameworks(tmp_path):
    config = tiny_config_with(tmp_path, USE_EXAMPLE)
    result = run_rnn(config, "++debug_dead_relu_interval", "-1")
    assert (
        result.returncode == 2 and "must be in [0, inf), but got -1 (from ++debug_dead_relu_interval)" in result.stderr
    )
    with pytest.raises(ConfigError, match="did you mean 'debug_dead_relu_interval'"):
        load_config([tiny_config_with(tmp_path, USE_EXAMPLE + "debug_dead_relu_intervall = 5\n")])
    with pytest.raises(ConfigError, match="has no PLUGINS"):
        load_config([TINY_CONFIG], {"plugins": ["framework.log"]})


def test_built_in_options_are_known_without_importing_torch():
    code = (
        "import sys; from framework import options\n"
        "assert options.get('debug_grad_health').true_means == 10\n"
        "assert options.closest_name('debug_grad_helth') == 'debug_grad_health'\n"
        "assert 'torch' not in sys.modules, 'validation imported torch'\n"
    )
    subprocess.run([sys.executable, "-c", code], cwd=ROOT, check=True)


def test_callbacks_run_by_order_then_by_when_they_were_added():
    callbacks, seen = Callbacks(), []
    callbacks.on(Event.STEP_END, lambda s: seen.append("report"), Order.REPORT)
    callbacks.on(Event.STEP_END, lambda s: seen.append("observe 1"))
    callbacks.on(Event.STEP_END, lambda s: seen.append("training"), Order.TRAINING)
    callbacks.on(Event.STEP_END, lambda s: seen.append("observe 2"))
    callbacks.emit(Event.STEP_END, None)
    assert seen == ["training", "observe 1", "observe 2", "report"]


class _Interrupt(nn.Linear):
    def forward(self, x):
        raise KeyboardInterrupt


@pytest.mark.parametrize(
    ("change", "outcome", "raised"),
    [
        ({}, "completed", None),
        ({"train_step": lambda **_: 1 / 0}, "exception", ZeroDivisionError),
        ({"get_model": lambda **_: _Interrupt(4, 3)}, "interrupted", KeyboardInterrupt),
        ({"callbacks": {"step_end": lambda state: (_ for _ in ()).throw(StopTraining("enough"))}}, "stopped", None),
        ({"callbacks": {"step_end": lambda state: state.control.stop("asked")}}, "interrupted", TrainingInterrupted),
    ],
)
def test_close_runs_however_the_run_ends(change, outcome, raised):
    closed = []
    close = {"close": lambda state: closed.append(state.outcome)}
    user = {**change.get("callbacks", {}), **close}
    engine = Engine(load_config([TINY_CONFIG], {"num_epochs": 1, **change, "callbacks": user}))
    if raised is None:
        engine.train()
    else:
        with pytest.raises(raised):
            engine.train()
    assert closed == [outcome]


def test_eval_and_forward_exceptions_get_the_same_note_as_training(tmp_path):
    prefix = str(tmp_path / "m")
    assert run_rnn(TINY_CONFIG, "++num_epochs", "1", "++model", prefix).returncode == 0
    failing = tiny_config_with(
        tmp_path,
        "\ndef train_step(*, model, extern_data, run_ctx, **_kwargs):\n"
        "    raise RuntimeError('eval breaks')\n"
        "\ndef forward_step(*, model, extern_data):  # no run_ctx, no **kwargs: called with what it accepts\n"
        "    raise RuntimeError('forward breaks')\n",
    )
    result = run_rnn(failing, "++task", "eval", "++model", prefix)
    assert result.returncode == 1 and "eval breaks" in result.stderr
    assert "[framework] raised during eval step on dataset 'dev' at epoch 1, global step 10" in result.stderr
    result = run_rnn(failing, "++task", "forward", "++forward_data", "dev", "++model", prefix)
    assert result.returncode == 1 and "forward breaks" in result.stderr
    assert "[framework] raised during forward step on dataset 'dev' at epoch 1" in result.stderr


class _NanInEval(nn.Module):
    def forward(self, x):
        return x if self.training else x * float("nan")


def _eval_nan_model(**_):
    return nn.Sequential(nn.Linear(4, 16), _NanInEval(), nn.Linear(16, 3))


def test_a_nan_in_dev_scores_is_named_like_one_in_training(output):  # noqa: F811
    engine = _train(get_model=_eval_nan_model, num_epochs=2, debug_loss_window=0)
    text = output()
    assert text.count("WARNING non-finite values in evaluation step 0 of dataset 'dev'") == 2  # once per epoch
    assert "first module whose output is non-finite while its inputs are finite: 1 (_NanInEval)" in text
    assert engine.state.epoch == 2 and all(torch.isfinite(p).all() for p in engine.state.model.parameters())


def test_any_dataset_name_works_in_scores_tensorboard_and_the_watches(tmp_path, output):  # noqa: F811
    engine = _train(
        train=_memorizable(48, 0),
        dev=None,
        eval_datasets={"dev_other": _memorizable(48, 1)},
        get_model=_wide,
        num_epochs=8,
        batch_size=8,
        tensorboard_dir=str(tmp_path / "tb"),
        learning_rate_control="newbob",
        learning_rate_control_error_measure="dev_other_ce",
    )
    assert "WARNING learning watch: overfitting: dev_other_ce rose for 2 epochs" in output()
    scores = engine.state.lr_control.scores
    assert set(scores[8]) == {"train", "dev_other"} and min(engine.state.lr_control.epoch_lrs.values()) < 1e-2
    events = EventAccumulator(str(tmp_path / "tb"))
    events.Reload()
    logged = events.Scalars("epoch/dev_other/ce")
    assert [e.step for e in logged] == list(range(1, 9))
    assert logged[-1].value == pytest.approx(scores[8]["dev_other"]["ce"], rel=1e-5)
