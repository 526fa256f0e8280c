"""``returnn.config.get_global_config()`` in code a RETURNN config calls: RETURNN's Config interface over the run's
config, with RETURNN installed (compared with RETURNN's own Config on the same values) and without."""

from __future__ import annotations

import subprocess
import sys

import pytest

from framework.base.config import Config
from framework.base.returnn_config import ReturnnConfigView

VALUES = {
    "steps": [100, 200],
    "rates": (1e-5, 1e-3, 1e-6),
    "lr": 0.5,
    "epochs": 10,
    "flag": True,
    "flag_int": 0,
    "name": "adam",
    "inf": "inf",
    "nothing": None,
    "opts": {"class": "adamw"},
    "pair": (3, 4),
    "one": 7,
}
CALLS = [
    (method, key, *args)
    for key in [*VALUES, "unset"]
    for method, args in (
        ("value", ("dflt",)),
        ("value", (None, 0)),
        ("typed_value", ()),
        ("typed_value", ("dflt",)),
        ("opt_typed_value", ("dflt",)),
        ("int", (-1,)),
        ("float", (-1.0,)),
        ("bool", (False,)),
        ("bool_or_other", ("dflt",)),
        ("list", ()),
        ("int_list", ()),
        ("float_list", ()),
        ("int_pair", ()),
        ("has", ()),
        ("is_typed", ()),
        ("is_true", ()),
        ("is_of_type", ((list, tuple),)),
        ("get_of_type", (dict, "dflt")),
    )
]


def _outcome(config, method, key, *args):
    try:
        return "value", getattr(config, method)(key, *args)
    except (AssertionError, TypeError, ValueError, IndexError, KeyError):
        return "raises", None


def test_each_reader_gives_what_returnns_config_gives_on_the_same_values():
    returnn_config = pytest.importorskip("returnn.config")
    theirs = returnn_config.Config()
    theirs.update(VALUES)
    ours = ReturnnConfigView(Config(dict(VALUES)))
    differences = [
        (call, _outcome(theirs, *call), _outcome(ours, *call))
        for call in CALLS
        if _outcome(theirs, *call) != _outcome(ours, *call)
    ]
    assert not differences, differences
    assert {k: v for k, v in ours.typed_dict.items() if k != "config"} == theirs.typed_dict


def test_the_view_sees_overrides_and_writes_as_an_override():
    config = Config({"lr": 0.5}, overrides={"lr": 0.25})
    view = ReturnnConfigView(config)
    assert view.float("lr", 0.0) == 0.25
    view.set("warmup", 3)
    assert config.typed_value("warmup") == 3 and view.int("warmup", 0) == 3


SCRIPT = r"""
import sys
{block}
from framework.base.config import load_config
config = load_config([sys.argv[1]])
print("schedule", config.typed_value("dynamic_learning_rate")(global_train_step=150, learning_rate=2.0))
print("returnn.config is", "the stand-in" if "(framework)" in sys.modules["returnn.config"].__doc__ else "RETURNN's")
"""

CONFIG = """
from returnn.config import get_global_config

learning_rate_piecewise_steps = [100, 200]
learning_rate_piecewise_values = [0.0, 1.0, 0.5]
train = {"class": "Task12AXDataset", "num_seqs": 4}


def dynamic_learning_rate(*, global_train_step, learning_rate, **_kwargs):
    config = get_global_config()
    steps = config.int_list("learning_rate_piecewise_steps")
    values = config.float_list("learning_rate_piecewise_values")
    return learning_rate * (values[1] + (values[2] - values[1]) * (global_train_step - steps[0]) / (steps[1] - steps[0]))
"""


@pytest.mark.parametrize("installed", [True, False], ids=["with RETURNN", "without RETURNN"])
def test_a_learning_rate_function_reads_the_run_config_through_returnns_get_global_config(tmp_path, installed):
    if installed:
        pytest.importorskip("returnn.config")
    config = tmp_path / "returnn.config"
    config.write_text(CONFIG)
    block = "" if installed else "sys.modules['returnn'] = None  # as if RETURNN were not installed"
    run = subprocess.run(
        [sys.executable, "-c", SCRIPT.format(block=block), str(config)], capture_output=True, text=True, timeout=120
    )
    assert run.returncode == 0, run.stdout + run.stderr
    assert "schedule 1.5" in run.stdout  # 2.0 * (1.0 + (0.5 - 1.0) * 50 / 100)
    assert f"returnn.config is {'RETURNN' if installed else 'the stand-in'}" in run.stdout
