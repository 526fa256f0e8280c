"""Statements that throw away the result of an out-of-place operation (framework.debug.discarded_results): named
with their file and line; assignments, in-place variants and Python's own in-place methods are quiet."""

from __future__ import annotations

import os

from conftest import ROOT, captured_log
from framework.assembly import Engine
from framework.base.config import load_config
from framework.debug.discarded_results import discarded_calls

SOURCE = """
import torch
import torch.nn.functional as F

def step(x, mask, seen, logger, layer, vectors):
    x.masked_fill(mask, 0.0)
    x = x.masked_fill(mask, 0.0)
    x.masked_fill_(mask, 0.0)
    F.relu(x)
    F.relu(x, inplace=True)
    torch.clamp(x, 0, 1, out=x)
    layer.from_pretrained(vectors)
    seen.add(3)
    logger.log(10, "x")
    return x.clamp(0, 1)
"""


def test_thrown_away_results_are_found_and_in_place_or_assigned_ones_are_not():
    found = [(line, name) for line, _, name in discarded_calls(SOURCE)]
    assert found == [(6, "masked_fill"), (9, "relu"), (12, "from_pretrained")]


def test_a_run_names_the_line_and_its_twin_is_quiet():
    files = [os.path.join(ROOT, "tests", "zoo", f) for f in ("classify.py", "cause_classify_masked_fill_discarded.py")]

    def run(**overrides) -> str:
        with captured_log(4) as lines:
            Engine(load_config(files, {"model": None, "num_epochs": 1, **overrides})).run("train")
        return "\n".join(lines)

    bug = run()
    assert "cause_classify_masked_fill_discarded.py:14: `logits.masked_fill(banned, -1e4)` throws away what " in bug
    assert "masked_fill returns: it returns a new tensor and leaves its input as it was (masked_fill_ changes" in bug
    assert "throws away" not in run(bug=False)


def test_a_branch_that_the_configs_own_flag_rules_out_is_not_judged():
    source = "def build(layer, v):\n    if bug:\n        layer.from_pretrained(v)\n    else:\n        layer = layer.from_pretrained(v)\n"
    assert discarded_calls(source, {"bug": False}) == []
    assert [line for line, _, _ in discarded_calls(source, {"bug": True})] == [3]
    assert [line for line, _, _ in discarded_calls(source)] == [3]  # not a flag of the config: both branches judged
