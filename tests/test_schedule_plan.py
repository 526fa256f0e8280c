"""The learning-rate plan against the planned run (issue 49: configured against applied, at startup).

``dynamic_learning_rate`` is evaluated over the steps the run will take before the first one: a plan whose peak is
``learning_rate`` squared (a rate returned where a factor is expected) and a plan that falls 1000x below its own
peak before half the run (a schedule in epochs given steps) and a plan still rising far below ``learning_rate`` when
the run ends (a warm-up the run never finishes, a per-batch schedule moved once per epoch) are warnings; a plan that uses ``learning_rate`` as a
scale (Noam's) is a note; warmup with cosine decay is quiet. Real Engine runs of the tiny config, in process.
"""

from __future__ import annotations

import pytest

from conftest import tiny_config_with
from framework.assembly import Engine
from framework.base import findings
from framework.base.config import load_config

SCHEDULES = {
    "a rate where a factor is expected": (
        "learning_rate = 1e-2\n"
        "def dynamic_learning_rate(*, global_train_step, learning_rate, **_):\n"
        "    return learning_rate * (learning_rate * 0.999 ** global_train_step)\n",
        "warning",
        "which is learning_rate squared",
    ),
    "a schedule in epochs given global_train_step": (
        "def dynamic_learning_rate(*, global_train_step, learning_rate, **_):\n"
        "    return learning_rate * 0.1 ** global_train_step  # meant: 0.1 per epoch\n",
        "warning",
        "falls below 0.001 of its own peak",
    ),
    "a negative rate": (
        "def dynamic_learning_rate(*, global_train_step, learning_rate, **_):\n"
        "    return learning_rate * (1 - global_train_step / 10)\n",
        "warning",
        "a learning rate must be a finite number >= 0",
    ),
    "Noam's schedule with learning_rate as its scale": (
        "learning_rate = 1.0\n"
        "def dynamic_learning_rate(*, global_train_step, learning_rate, **_):\n"
        "    step = global_train_step + 1\n"
        "    return learning_rate * 512 ** -0.5 * min(step ** -0.5, step * 4 ** -1.5)  # d_model 512\n",
        "note",
        "does this by design",
    ),
    "a per-batch one-cycle schedule moved once per epoch": (
        "def dynamic_learning_rate(*, epoch, learning_rate, **_):\n"
        "    stepped, total = epoch - 1, 1000  # built for num_epochs * len(loader), stepped once per epoch\n"
        "    return learning_rate / 25 * (1 + 24 * stepped / (0.3 * total))  # its warm-up\n",
        "warning",
        "Its rate changes only where an epoch starts (2 values for 20 planned steps)",
    ),
    "a warm-up longer than the run": (
        "def dynamic_learning_rate(*, global_train_step, learning_rate, **_):\n"
        "    return learning_rate * min(1.0, (global_train_step + 1) / 10000)\n",
        "warning",
        "is still rising when the run ends",
    ),
    "a linear warm-up that reaches learning_rate within the run": (
        "def dynamic_learning_rate(*, global_train_step, learning_rate, **_):\n"
        "    return learning_rate * min(1.0, (global_train_step + 1) / 20)\n",
        None,
        "",
    ),
    "linear warmup, then cosine decay to zero": (
        "import math\n"
        "def dynamic_learning_rate(*, global_train_step, learning_rate, **_):\n"
        "    total, warmup = 26, 4\n"
        "    if global_train_step < warmup:\n"
        "        return learning_rate * (global_train_step + 1) / warmup\n"
        "    return learning_rate * 0.5 * (1 + math.cos(math.pi * (global_train_step - warmup) / (total - warmup)))\n",
        None,
        "",
    ),
}


@pytest.mark.parametrize("name", list(SCHEDULES))
def test_the_plan_of_the_run_is_judged_at_startup(tmp_path, name):
    text, severity, words = SCHEDULES[name]
    seen: list[findings.Finding] = []
    findings.add_sink(seen.append)
    try:
        config = load_config([tiny_config_with(tmp_path, "\n" + text)], {"model": None, "num_epochs": 2})
        engine = Engine(config)
        engine.init_train()  # startup only: the plan is judged before the first step
    finally:
        findings.remove_sink(seen.append)
    plan = [f for f in seen if f.check == "schedule plan"]
    if severity is None:
        assert plan == [], name
    else:
        assert len(plan) == 1 and plan[0].severity == severity and words in plan[0].message, (name, plan)
        assert plan[0].evidence and plan[0].where["option"] == "dynamic_learning_rate"


def test_the_option_turns_the_check_off(tmp_path):
    seen: list[findings.Finding] = []
    findings.add_sink(seen.append)
    try:
        text = SCHEDULES["a rate where a factor is expected"][0]
        overrides = {"model": None, "debug_schedule_plan": False}
        Engine(load_config([tiny_config_with(tmp_path, "\n" + text)], overrides)).init_train()
    finally:
        findings.remove_sink(seen.append)
    assert [f for f in seen if f.check == "schedule plan"] == []
