"""The evaluation path against the training path on the trained model (framework.debug.mode_switch): when the same
train batches score far worse evaluated as dev is, each module class in turn runs in training mode inside the
evaluation, and the class that closes the gap is named, with a momentum of 0 named as the configuration that leaves
running statistics at their initial values."""

from __future__ import annotations

from conftest import zoo_log


def test_a_batch_norm_whose_running_statistics_never_move_is_named_with_its_momentum():
    bug = zoo_log("classify.py", "cause_classify_bn_momentum_zero.py", num_epochs=1)
    assert "the paths part in the eval-mode behaviour of the 1 BatchNorm1d module(s) ('0')" in bug
    assert "still hold their initial running statistics (running_mean 0, running_var 1)" in bug
    assert "their momentum is 0, so the running mean and variance are never updated" in bug
    assert "findings: 1 warning" in bug  # the chance-level diagnosis and the first-sight gap: one record
    assert "WARNING" not in zoo_log("classify.py", "cause_classify_bn_momentum_zero.py", bug=False, num_epochs=1)
