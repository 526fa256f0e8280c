"""A sequence's result must not depend on where it sits in its batch (issue 49): the batch-position check.

Before the first step, one batch of the first sequence repeated at every place runs under two seeds on a copy in
eval mode: rows that differ the same way under both depend on their index in the batch (positions taken along the
batch axis), a warning that says between which modules the rows first differ. Rows that differ otherwise come from
randomness the step draws per row (noise augmentation): quiet. Real Engine runs of tests/zoo configs on the 12AX
tagger (sequences.py), in process.
"""

from __future__ import annotations

import os

import pytest
from devkit.doc_commands import assert_documented

from conftest import ROOT
from framework.assembly import Engine
from framework.base.config import load_config

ZOO = os.path.join(ROOT, "tests", "zoo")
WARNING = "WARNING sanity check (first step): a sequence's result depends on where it sits in its batch"


def _train(files: list[str], **overrides) -> str:
    config = load_config([os.path.join(ZOO, f) for f in ["sequences.py", *files]], {"model": None, **overrides})
    Engine(config).run("train")


def test_positions_taken_along_the_batch_axis_are_a_warning_that_says_where_they_enter(output):
    _train(["batch_position_pe.py"])
    text = output()
    warnings = [line for line in text.splitlines() if line.startswith("WARNING")]
    assert len(warnings) == 1 and warnings[0].startswith(WARNING), text[-3000:]
    assert "first differ between the output of 'embed' (Embedding) and the input of 'lstm' (LSTM)" in warnings[0]
    assert_documented(text, "docs/health.rst", WARNING)


@pytest.mark.parametrize(
    "files, overrides",
    [
        (["batch_position_pe.py"], {"positions_from_batch_axis": False}),  # the twin: positions along time
        (["batch_position_noise.py"], {}),  # noise drawn per row: randomness, not the place
        (["batch_position_flip.py"], {}),  # a flip drawn per row: the same largest difference under any seed
    ],
    ids=["positions along time", "noise augmentation per row", "a flip per row"],
)
def test_a_model_whose_rows_differ_only_by_randomness_or_not_at_all_is_quiet(output, files, overrides):
    _train(files, **overrides)
    text = output()
    assert "Epoch 1 train" in text and [line for line in text.splitlines() if "WARNING" in line] == []


def test_the_option_turns_the_check_off(output):
    _train(["batch_position_pe.py"], debug_batch_position_check=False)
    assert "WARNING" not in output()
