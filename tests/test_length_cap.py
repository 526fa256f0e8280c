"""Sequences cut at one length (framework.debug.length_cap): a pile-up of lengths at their maximum is found at
startup, and only the experiment after training (the cut sequences scored apart from the longest uncut ones) makes a
warning: a cut that removed what decides the label is named with the scores; the same cut where the label sits
early costs nothing and is quiet, and so are long sequences that are harder for another reason (the uncut ones lose
nothing without their ends)."""

from __future__ import annotations

import re

import numpy as np

from conftest import zoo_log
from framework.debug.length_cap import cut_length


def test_a_pile_up_at_the_longest_length_is_a_cut_and_other_length_distributions_are_not():
    rng = np.random.default_rng(0)
    natural = rng.integers(10, 200, size=1000)
    assert cut_length(np.minimum(natural, 48)) == 48
    assert cut_length(natural) is None  # lengths spread up to their maximum
    assert cut_length(np.full(500, 128)) is None  # fixed-length sequences: nothing shorter to compare with
    assert cut_length(np.minimum(natural, 190)) is None  # a few at the maximum: no pile-up
    assert cut_length(np.concatenate([np.full(200, 48), np.full(200, 47), rng.integers(10, 47, 100)])) is None


def test_a_cut_that_removed_the_label_is_named_and_a_harmless_cut_is_quiet():
    log = zoo_log("cause_documents_cut.py")
    assert "WARNING length-cap check: dev key 'data': " in log
    assert "have exactly the longest length, 24, and none is longer, while the others spread from 10 to 23" in log
    found = re.search(
        r"the \d+ cut ones have err ([\d.]+) and the \d+ longest uncut ones \(lengths \d+ to 23\) ([\d.]+), and "
        r"([\d.]+) when those are read without their last quarter: what comes late in a sequence decides it",
        log,
    )
    assert found is not None and min(float(found[1]), float(found[3])) > 2 * float(found[2]) + 0.05
    assert "WARNING" not in zoo_log("cause_documents_cut.py", cue_early=True, num_epochs=2)


def test_long_sequences_that_are_harder_for_another_reason_are_not_blamed_on_the_cut():
    # the cut ones score worse, but the uncut ones lose nothing without their ends: the cut did not decide them
    log = zoo_log("cause_documents_cut.py", "healthy_documents_long_harder.py", cue_early=True)
    assert "WARNING" not in log
    found = re.search(r"Length-cap check: dev key 'data', err: cut ([\d.]+), uncut ([\d.]+), uncut without", log)
    assert found is not None and float(found[1]) > 2 * float(found[2]) + 0.05  # the first rule alone would warn
