"""The evaluation path against the training path on the trained model (framework.debug.mode_switch and
step_branch): when the same train batches score far worse evaluated as dev is, each module class in turn runs in
training mode inside the evaluation, and the class that closes the gap is named, with a momentum of 0 named as the
configuration that leaves running statistics at their initial values; and train_step runs with run_ctx.train_flag True
in eval mode, which names the step's own evaluation branch, with how it rearranges the model's inputs."""

from __future__ import annotations

from conftest import zoo_log


def test_a_batch_norm_whose_running_statistics_never_move_is_named_with_its_momentum():
    bug = zoo_log("classify.py", "cause_classify_bn_momentum_zero.py", num_epochs=1)
    assert "the paths part in the eval-mode behaviour of the 1 BatchNorm1d module(s) ('0')" in bug
    assert "still hold their initial running statistics (running_mean 0, running_var 1)" in bug
    assert "their momentum is 0, so the running mean and variance are never updated" in bug
    assert "findings: 1 warning" in bug  # the chance-level diagnosis and the first-sight gap: one record
    assert "WARNING" not in zoo_log("classify.py", "cause_classify_bn_momentum_zero.py", bug=False, num_epochs=1)


def test_an_evaluation_branch_that_pads_on_the_left_is_named_with_the_moved_argument():
    bug = zoo_log("cause_eval_left_padded.py", num_epochs=1)
    assert "the paths part in train_step's own branch for evaluation (run_ctx.train_flag read at " in bug
    assert "cause_eval_left_padded.py:64 in train_step" in bug
    assert "the model's argument 'symbols' holds, for 15 of 16 sequences, the values the training branch gives" in bug
    assert "the sequences are padded on the left" in bug
    assert "with only those moves made on the training branch (its outputs moved back), ce is " in bug
    assert "findings: 1 warning" in bug  # the chance-level diagnosis and the first-sight gap: one record
    assert "WARNING" not in zoo_log("cause_eval_left_padded.py", bug=False, num_epochs=1)


def test_the_symptom_experiments_leave_weights_that_the_step_moves_in_place_as_they_were():
    text = zoo_log("cause_eval_left_padded.py", "ema_updated_in_step.py", num_epochs=1)
    assert "the paths part in train_step's own branch for evaluation" in text  # the experiments ran
    steps = [line.split(": ")[-1] for line in text.splitlines() if "EMA weights after a step" in line]
    end = [line.split(": ")[-1] for line in text.splitlines() if "EMA weights at the end" in line]
    assert steps and end == [steps[-1]]


def test_inputs_padded_on_the_left_that_the_model_does_not_care_about_are_no_cause():
    # a tagger without positions: the moves alone leave its loss as it was, so the gap is not theirs (the evaluation
    # branch inverts the tags): the paths part in the step's branch, said in a note, not a warning on the padding
    text = zoo_log("cause_eval_left_padded.py", "eval_left_padded_position_free.py", num_epochs=1)
    assert "the moves alone open 0% of the gap" in text
    assert "The model computes otherwise on its inputs so arranged" not in text
