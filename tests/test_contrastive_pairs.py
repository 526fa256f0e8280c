"""Contrastive targets made in the step (framework.debug.contrastive_pairs): targets that pair nearly every row with
a view of another example, while another column holds the row's own other view, are named with the layout; views that
are exact copies of each other (one augmentation draw for both) are named; the right index for the layout, in-batch
negatives over two encoders and a prototypical-network episode are quiet."""

from __future__ import annotations

from conftest import ROOT, zoo_log


def test_positives_that_assume_interleaved_views_of_concatenated_ones_are_named():
    bug = zoo_log("cause_simclr_interleaved_targets.py")
    assert "The targets of cross_entropy at " in bug and "pair rows with views of other examples" in bug
    assert "the scores are a [32, 32] matrix between rows" in bug
    assert "for 8 of the 8 targets traced, the target's score is computed from two different examples" in bug
    assert "which the matrix holds in column 16 (views concatenated as [all first views, all second views]" in bug
    assert "row 0 -> column 1: examples [0, 1]" in bug
    assert "WARNING" not in zoo_log("cause_simclr_interleaved_targets.py", interleaved_targets=False)


def test_views_from_one_augmentation_draw_are_named():
    bug = zoo_log("cause_simclr_interleaved_targets.py", interleaved_targets=False, one_draw=True)
    assert "The two views of each example are identical: the scores at " in bug
    assert "are a [32, 32] matrix between rows whose targets are made in the step, and for 32 of its 32 rows" in bug
    assert "findings: 1 warning" in bug


def test_in_batch_negatives_of_two_encoders_and_a_prototypical_episode_are_quiet():
    text = zoo_log(f"{ROOT}/tests/corpus/healthy/in_batch_negatives_arange_targets.py", num_epochs=1)
    assert "pair rows with views of other examples" not in text
    # queries paired with another example's prototype by design: no column holds a query's own other view
    episode = zoo_log("classify.py", "healthy_protonet_episode.py", num_epochs=1)
    assert "pair rows with views of other examples" not in episode and "Epoch 1 evaluation" in episode
