"""A ReduceLROnPlateau that reads its score the wrong way round (framework.debug.plateau_direction): stepped with an
accuracy in mode 'min', it is named with the score it is given; in mode 'max' it is quiet."""

from __future__ import annotations

import os

import pytest

from conftest import ROOT, captured_log
from framework.assembly import Engine
from framework.base.config import load_config

FILES = [os.path.join(ROOT, "tests", "zoo", f) for f in ("classify.py", "cause_classify_plateau_on_accuracy.py")]


def _train(**overrides) -> str:
    with captured_log(4) as lines:
        Engine(load_config(FILES, {"model": None, **overrides})).run("train")
    return "\n".join(lines)


@pytest.mark.slow  # two runs of 6 epochs of 250 steps
def test_an_accuracy_given_to_a_plateau_schedule_in_mode_min_is_named_and_mode_max_is_quiet():
    bug = _train()
    assert (
        "WARNING learning watch: torch's ReduceLROnPlateau in mode 'min' (lower is better) is given one minus " in bug
    )
    assert "the score (an accuracy, if the score is an error rate) dev_err: its best value" in bug
    twin = _train(bug=False)
    assert "ReduceLROnPlateau" not in twin and "WARNING" not in twin
