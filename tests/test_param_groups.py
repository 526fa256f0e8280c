"""Parameter groups at their own rates (issue 53, item 2): ``optimizer['param_groups']`` selects parameters by name
and gives them a learning-rate multiplier and a weight decay; every schedule (the epoch's rate, a per-step
``dynamic_learning_rate``) multiplies per group, so the ratios between groups hold, also across a resume. Before,
a schedule wrote one rate into every group. Real Engine runs of the tiny config, in process.
"""

from __future__ import annotations

import pytest

from conftest import tiny_config_with
from framework.assembly import Engine
from framework.base.config import load_config
from framework.base.errors import ConfigError

GROUPS = """
optimizer = {"class": "adamw", "weight_decay": 0.01, "param_groups": [
    {"params": "3.*", "lr_multiplier": 10.0},  # the head: ten times the body's rate
    {"params": ["0.weight"], "lr_multiplier": 0.1, "weight_decay": 0.0},
]}
def dynamic_learning_rate(*, global_train_step, learning_rate, **_):
    return learning_rate * 0.9 ** global_train_step
"""


def _groups(engine: Engine) -> list[tuple[float, float, float, int]]:
    return [
        (g["lr"], g.get("lr_multiplier", 1.0), g.get("weight_decay", 0.0), len(g["params"]))
        for g in engine.state.optimizer.param_groups
    ]


def test_each_group_keeps_its_ratio_to_the_scheduled_rate_through_training_and_resume(tmp_path):
    config_file = tiny_config_with(tmp_path, GROUPS)
    overrides = {"model": str(tmp_path / "model"), "num_epochs": 1}
    engine = Engine(load_config([config_file], overrides))
    engine.run("train")
    groups = _groups(engine)
    base = engine.state.optimizer.param_groups[-1]["lr"]  # the rest: multiplier 1, decaying by RETURNN's rule
    assert base < 1e-2 * 0.9**5  # the schedule ran
    by_multiplier = {multiplier: lr for lr, multiplier, _, _ in groups}
    assert by_multiplier[10.0] == pytest.approx(10 * base) and by_multiplier[0.1] == pytest.approx(0.1 * base)
    # the head's weight and bias (decay 0.01 and, for the bias, 0 by RETURNN's rule), the first weight (decay 0 as
    # given), then the rest (the first bias: no decay)
    assert [(m, wd, n) for _, m, wd, n in groups] == [(10.0, 0.01, 1), (10.0, 0.0, 1), (0.1, 0.0, 1), (1.0, 0.0, 1)]
    resumed = Engine(load_config([config_file], {**overrides, "num_epochs": 2}))
    resumed.run("train")
    lrs = {multiplier: lr for lr, multiplier, _, _ in _groups(resumed)}
    assert lrs[10.0] == pytest.approx(10 * lrs[1.0]) and lrs[1.0] < base


@pytest.mark.parametrize(
    "groups, words",
    [
        ('[{"params": "encoder.*", "lr_multiplier": 2.0}]', "selects no trainable parameter"),
        ('[{"params": "3.*", "lr": 0.1}]', "unknown keys: lr"),
        ('{"params": "3.*"}', "must be a list of dicts"),
    ],
)
def test_a_group_that_cannot_be_meant_is_a_config_error(tmp_path, groups, words):
    text = f'optimizer = {{"class": "adam", "param_groups": {groups}}}\n'
    engine = Engine(load_config([tiny_config_with(tmp_path, text)], {"model": None}))
    with pytest.raises(ConfigError, match=words):
        engine.run("train")
