"""The plugin seam: a diagnostic in one file, ordered callbacks, CLOSE however a run ends, every task's
step events, one step runner, scores keyed by (dataset, loss)."""

from __future__ import annotations

import importlib
import os
import pkgutil
import re
import subprocess
import sys

import pytest
import torch
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
from test_health import _noisy_clusters, _train, _wide
from torch import nn

from conftest import ROOT, TINY_CONFIG, run_rnn, tiny_config_with
from framework.assembly import Engine
from framework.base import options
from framework.base.config import load_config
from framework.base.declarations import declaring_modules
from framework.base.errors import ConfigError, TrainingInterrupted
from framework.core.events import Callbacks, Event, Order, OrderError, StopTraining
from framework.core.measurements import CHANCE_LEVELS, LOSS_FLOORS
from framework.core.plugin import Plugin, on
from framework.core.run_plugins import relate
from framework.core.store import Store

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
    engine = Engine(dead)
    engine.run("train")
    warnings = [line for line in output().splitlines() if "WARNING dead ReLU" in line]
    assert warnings == ["WARNING dead ReLU: '1' output only zeros in training step 0."]  # once, with the layer
    # one finding record, reported the one way (findings.jsonl, summary, TensorBoard), not a line of its own
    assert [(f.check, f.where, f.option) for f in engine.findings.found if f.check == "dead ReLU"] == [
        ("dead ReLU", {"module": "1"}, "debug_dead_relu_interval = 0")
    ]
    healthy = load_config([tiny_config_with(tmp_path, USE_EXAMPLE)], {"debug_dead_relu_interval": 5})
    Engine(healthy).run("train")
    assert "dead ReLU" not in output()


@pytest.mark.slow  # seconds of real runs: the full suite runs it, the fast subset does not
def test_a_plugins_options_are_validated_like_the_frameworks(tmp_path):
    config = tiny_config_with(tmp_path, USE_EXAMPLE)
    result = run_rnn(config, "++debug_dead_relu_interval", "-1")
    assert (
        result.returncode == 2 and "must be in [0, inf), but got -1 (from ++debug_dead_relu_interval)" in result.stderr
    )
    with pytest.raises(ConfigError, match="did you mean 'debug_dead_relu_interval'"):
        load_config([tiny_config_with(tmp_path, USE_EXAMPLE + "debug_dead_relu_intervall = 5\n")])
    with pytest.raises(ConfigError, match="has no PLUGINS"):
        load_config([TINY_CONFIG], {"plugins": ["framework.base.log"]})


def test_built_in_options_are_known_without_importing_torch():
    code = (
        "import sys; from framework.base import options\n"
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


def test_declared_constraints_win_over_phases_and_a_cycle_is_refused():
    callbacks, seen = Callbacks(), []
    callbacks.on(Event.STEP_END, lambda s: seen.append("a check"), Order.CHECK, owner="Checker")
    callbacks.on(Event.STEP_END, lambda s: seen.append("an observer"), Order.OBSERVE, owner="Observer")
    callbacks.on(Event.STEP_END, lambda s: seen.append("training"), Order.TRAINING, owner="Trainer")
    callbacks.require("Observer", "Checker")  # the check needs what the observer measures
    callbacks.emit(Event.STEP_END, None)
    assert seen == ["training", "an observer", "a check"]
    assert callbacks.order_of(Event.STEP_END) == ["Trainer.<lambda>", "Observer.<lambda>", "Checker.<lambda>"]
    with pytest.raises(
        OrderError, match="cycle: .*Checker -> Observer -> Checker|cycle: .*Observer -> Checker -> Observer"
    ):
        callbacks.require("Checker", "Observer")


def test_constraints_are_transitive_across_an_owner_absent_from_the_event():
    callbacks, seen = Callbacks(), []
    callbacks.on(Event.STEP_END, lambda s: seen.append("C"), Order.TRAINING, owner="C")
    callbacks.on(Event.STEP_END, lambda s: seen.append("A"), Order.REPORT, owner="A")
    callbacks.on(Event.EPOCH_END, lambda s: None, owner="B")
    callbacks.require("A", "B")
    callbacks.require("B", "C")
    callbacks.emit(Event.STEP_END, None)
    assert seen == ["A", "C"]


def test_callbacks_of_one_phase_run_by_owner_name_whatever_the_subscription_order():
    callbacks, seen = Callbacks(), []
    callbacks.on(Event.STEP_END, lambda s: seen.append("Zeta"), owner="Zeta")
    callbacks.on(Event.STEP_END, lambda s: seen.append("Alpha"), owner="Alpha")
    callbacks.on(Event.STEP_END, lambda s: seen.append("Mid 1"), owner="Mid")
    callbacks.on(Event.STEP_END, lambda s: seen.append("Mid 2"), owner="Mid")
    callbacks.emit(Event.STEP_END, None)
    assert seen == ["Alpha", "Mid 1", "Mid 2", "Zeta"]


def test_after_all_others_puts_a_plugin_last_and_two_such_plugins_order_by_their_own_relations():
    def plugin(name: str, **relations: tuple[str, ...]) -> Plugin:
        cls = type(name, (Plugin,), {"tasks": ("train",), **relations, "close": on(Event.CLOSE)(lambda self, s: None)})
        return cls()

    plugins = [plugin("Last", after=("*",)), plugin("Zulu"), plugin("Early", after=("*",), before=("Last",))]
    plugins.append(plugin("Aardvark", order=Order.LAST))
    callbacks = Callbacks()
    for p in plugins:
        p.subscribe(callbacks)
    relate(plugins, callbacks, lambda key: None)
    assert callbacks.order_of(Event.CLOSE) == ["Zulu.<lambda>", "Aardvark.<lambda>", "Early.<lambda>", "Last.<lambda>"]


def test_every_plugin_module_of_the_plugin_packages_is_built_in_without_a_list():
    listing = []
    for package in ("framework.training", "framework.debug"):
        for info in pkgutil.iter_modules(importlib.import_module(package).__path__, package + "."):
            if hasattr(importlib.import_module(info.name), "PLUGINS"):
                listing.append(info.name)
    assert declaring_modules("plugins") == sorted(listing)
    assert "framework.debug.numerics" in listing and "framework.training.progress" in listing


def test_a_once_callback_runs_the_first_time_only():
    callbacks, seen = Callbacks(), []
    callbacks.on(Event.STEP_START, lambda s: seen.append(s), once=True)
    callbacks.on(Event.STEP_START, lambda s: seen.append(-s))
    for step in (1, 2):
        callbacks.emit(Event.STEP_START, step)
    assert seen == [1, -1, -2]


def test_only_the_declared_producer_puts_a_measurement():
    class Producer(Plugin):
        provides = (CHANCE_LEVELS,)

    class Intruder(Plugin):
        pass

    store = Store()
    store.declare(CHANCE_LEVELS, Producer.name)
    store.put(CHANCE_LEVELS, {"ce": 1.0}, by=Producer())
    assert store.get(CHANCE_LEVELS) == {"ce": 1.0} and store.get(LOSS_FLOORS) is None
    with pytest.raises(TypeError, match="Intruder puts Key.'chance_levels'. without declaring it"):
        store.put(CHANCE_LEVELS, {}, by=Intruder())
    with pytest.raises(TypeError, match="provided by two plugins"):
        store.declare(CHANCE_LEVELS, "Intruder")


def test_a_consumer_runs_after_its_producer_and_a_constraint_cycle_is_a_config_error(tmp_path):
    plugins = tmp_path / "ordered_plugins.py"
    plugins.write_text(
        "from framework.core.events import Event, Order\n"
        "from framework.core.store import Key\n"
        "from framework.core.plugin import Plugin, on\n"
        "SEEN = []\n"
        "UPDATE_RATIO = Key('test_ratio', 'a measurement of the producer')\n"
        "class Consumer(Plugin):\n"
        "    order = Order.TRAINING  # an earlier phase than the producer: the declared need wins\n"
        "    needs = (UPDATE_RATIO,)\n"
        "    @on(Event.STEP_END, once=True)\n"
        "    def read(self, state):\n"
        "        SEEN.append(('consumer reads', state.store.get(UPDATE_RATIO)))\n"
        "class Producer(Plugin):\n"
        "    provides = (UPDATE_RATIO,)\n"
        "    @on(Event.STEP_END, once=True)\n"
        "    def measure(self, state):\n"
        "        state.store.put(UPDATE_RATIO, 0.5, by=self)\n"
        "PLUGINS = (Consumer, Producer)\n"
    )
    sys.path.insert(0, str(tmp_path))
    try:
        engine = Engine(load_config([TINY_CONFIG], {"plugins": ["ordered_plugins"], "num_epochs": 1}))
        engine.run("train")
        assert sys.modules["ordered_plugins"].SEEN == [("consumer reads", 0.5)]
        sys.modules["ordered_plugins"].Producer.needs = sys.modules["ordered_plugins"].Consumer.provides = ()
        sys.modules["ordered_plugins"].Producer.after = ("Consumer",)
        sys.modules["ordered_plugins"].Consumer.after = ("Producer",)
        with pytest.raises(ConfigError, match="plugin order constraints form a cycle"):
            Engine(load_config([TINY_CONFIG], {"plugins": ["ordered_plugins"], "num_epochs": 1})).run("train")
    finally:
        sys.path.remove(str(tmp_path))
        sys.modules.pop("ordered_plugins", None)


@pytest.mark.parametrize(
    ("after", "message"),
    [
        (("NumericsGaurd",), "names 'NumericsGaurd' in after/before, but no plugin is called that"),
        ("NumericsGuard", "is not a tuple; write e.g. after = ('NumericsGuard',)"),
    ],
)
def test_a_misspelled_or_untupled_relation_is_a_config_error(after, message):
    class Misdeclared(Plugin):
        pass

    Misdeclared.after = after
    with pytest.raises(ConfigError, match=re.escape(message)):
        Engine(load_config([TINY_CONFIG], {"plugins": [Misdeclared], "num_epochs": 1})).run("train")


def test_explain_plugins_prints_the_resolved_order_and_trains_nothing(tmp_path):
    result = run_rnn(TINY_CONFIG, "++model", str(tmp_path / "model"), "--explain-plugins", cwd=str(tmp_path))
    assert result.returncode == 0, result.stderr
    assert "Plugin callbacks per event, in the order they run:" in result.stdout
    step_start = next(line for line in result.stdout.splitlines() if line.strip().startswith("step_start:"))
    order = step_start.split(":", 1)[1].replace(" ", "").split(",")
    assert order.index("FirstStepProbes.open_session") < order.index("LossInputsCheck.judge_shared_run")
    assert order.index("LossInputsCheck.judge_shared_run") < order.index("PaddingProbe.probe")
    assert order.index("BatchIndependence.probe") < order.index("NumericsGuard.on_step_start")  # declared: after
    assert "chance_levels: provided by LossInputsCheck" in result.stdout
    assert "Epoch 1" not in result.stdout and not list(tmp_path.glob("model.*.pt"))


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
        engine.run("train")
    else:
        with pytest.raises(raised):
            engine.run("train")
    assert closed == [outcome]


def _raise(exc: Exception):
    def callback(state):
        raise exc

    return callback


def test_every_close_callback_runs_after_one_raised_and_the_first_close_error_surfaces(output):  # noqa: F811
    engine, closed = Engine(load_config([TINY_CONFIG], {"num_epochs": 1})), []
    engine.callbacks.on(Event.CLOSE, _raise(ValueError("first close breaks")))
    engine.callbacks.on(Event.CLOSE, lambda state: closed.append(state.outcome))
    engine.callbacks.on(Event.CLOSE, _raise(RuntimeError("third close breaks")))
    with pytest.raises(ValueError, match="first close breaks"):
        engine.run("train")
    assert closed == ["completed"]  # the run itself completed; its CLOSE callbacks all ran
    errors = [line for line in output().splitlines() if line.startswith("ERROR") and "while closing" in line]
    assert errors == [
        "ERROR run close: a callback raised while closing the run (after completed): RuntimeError: third close breaks"
    ]


def test_the_runs_own_error_is_reported_when_a_close_callback_raises_too(output):  # noqa: F811
    closed = []
    close = [_raise(RuntimeError("close breaks")), lambda state: closed.append(state.outcome)]
    change = {"num_epochs": 1, "train_step": lambda **_: 1 / 0, "callbacks": {"close": close}}
    engine = Engine(load_config([TINY_CONFIG], change))
    with pytest.raises(ZeroDivisionError):
        engine.run("train")
    assert closed == ["exception"] and engine.state.exception.__class__ is ZeroDivisionError
    errors = [line for line in output().splitlines() if line.startswith("ERROR") and "while closing" in line]
    assert errors == [
        "ERROR run close: a callback raised while closing the run (after exception): RuntimeError: close breaks"
    ]


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
    # RETURNN's engine evaluates a checkpoint at its global step - 1 (f118d4a)
    assert "[framework] raised during eval step on dataset 'dev' at epoch 1, global step 9" in result.stderr
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
    assert text.count("WARNING non-finite values in evaluation: step 0 of dataset 'dev'") == 2  # once per epoch
    assert "first module whose output is non-finite while its inputs are finite: 1 (_NanInEval)" in text
    assert engine.state.epoch == 2 and all(torch.isfinite(p).all() for p in engine.state.model.parameters())


@pytest.mark.slow  # 8 epochs with TensorBoard: about 9 s of CPU
def test_any_dataset_name_works_in_scores_tensorboard_and_the_watches(tmp_path, output):  # noqa: F811
    engine = _train(
        train=_noisy_clusters(48, 0, 0.5),
        dev=None,
        eval_datasets={"dev_other": _noisy_clusters(200, 1, 0.0)},
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
