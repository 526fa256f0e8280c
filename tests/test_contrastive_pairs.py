"""Contrastive targets made in the step (framework.debug.contrastive_pairs): targets that pair nearly every row with
a view of another example are named; the right index for the layout of the views, and in-batch negatives over two
encoders with arange targets, are quiet."""

from __future__ import annotations

from conftest import ROOT, zoo_log


def test_positives_that_assume_interleaved_views_of_concatenated_ones_are_named():
    bug = zoo_log("cause_simclr_interleaved_targets.py")
    assert "The targets of cross_entropy at " in bug and "pair rows with views of other examples" in bug
    assert "the scores are a [32, 32] matrix between rows" in bug
    assert "for 8 of the 8 targets traced, the target's score is computed from two different examples" in bug
    assert "row 0 -> column 1: examples [0, 1]" in bug
    assert "WARNING" not in zoo_log("cause_simclr_interleaved_targets.py", interleaved_targets=False)


def test_in_batch_negatives_of_two_encoders_are_quiet():
    text = zoo_log(f"{ROOT}/tests/corpus/healthy/in_batch_negatives_arange_targets.py", num_epochs=1)
    assert "pair rows with views of other examples" not in text
