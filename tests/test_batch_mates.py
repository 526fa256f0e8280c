"""A sequence in one batch against the same sequence in another (framework.debug.batch_mates): a pairing made by
indexing, which the gradient probe of the model's inputs cannot see, is named; its twin, a model that sorts the
batch for packing, is quiet (the healthy zoo and corpus runs cover the rest)."""

from __future__ import annotations

import os

from conftest import ROOT, captured_log
from framework.assembly import Engine
from framework.base.config import load_config

PAIRS = os.path.join(ROOT, "tests", "zoo", "cause_pairs_sorted_separately.py")


def _train(path: str, **overrides) -> str:
    with captured_log(4) as lines:
        Engine(load_config([path], {"model": None, **overrides})).run("train")
    return "\n".join(lines)


def test_a_key_sorted_by_its_own_lengths_is_named_and_one_order_for_all_keys_is_quiet():
    bug = _train(PAIRS)
    assert "WARNING sanity check (first step): What the model returns for a sequence depends on which other " in bug
    assert "sequences share its batch: on copies in eval mode, the first 14 sequences of the first batch ran" in bug
    assert "of the output of '(model)' equals none of the outputs of the halves" in bug
    assert "two batches of one half repeated (same padded length and place" in bug
    twin = _train(PAIRS, bug=False)
    assert "depends on which other sequences share its batch" not in twin
    assert (
        "batch-mates check 3" in twin
    )  # the experiment ran: the sequences together and as two batches of one half repeated
