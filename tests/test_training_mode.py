"""A model switched to eval mode between train steps (framework.debug.training_mode): a validation in a callback
that does not switch back is named with its line and the share of the epoch's steps it cost; switching back and a
mode set for whole epochs at their start are quiet; a train_step that switches (the first-step check's) is one
problem, one record."""

from __future__ import annotations

from torch import nn

from conftest import zoo_log


def test_a_validation_callback_that_leaves_eval_mode_is_named_with_its_line():
    log = zoo_log("classify.py", "silent_validation_leaves_eval.py", num_epochs=2, batch_size=64)
    assert (
        "WARNING training-mode check: from train step 11 of epoch 1 on, 15 of the epoch's 25 train steps ran their "
        "forward with the model in eval mode: tests/zoo/silent_validation_leaves_eval.py:17 in validate: "
        "state.model.eval() switched it to eval mode" in log
    )
    assert "(BatchNorm1d '1', Dropout '3')" in log
    assert "findings: 1 warning" in log  # reported once, not again in epoch 2
    assert nn.Module.train.__module__ == "torch.nn.modules.module"  # the wrapper is gone after the run


def test_switching_back_or_freezing_for_whole_epochs_is_quiet():
    quiet = zoo_log(
        "classify.py", "silent_validation_leaves_eval.py", restore=True, freeze_norm_each_epoch=True, batch_size=64
    )
    assert "WARNING" not in quiet


def test_acting_in_eval_mode_at_the_end_of_each_step_and_freezing_a_block_later_are_quiet():
    acting = zoo_log("classify.py", "silent_validation_leaves_eval.py", "healthy_acting_in_eval.py", restore=True)
    # each step starts with model.train(): its forward trains, and the dropout an evaluation of the step meets runs in
    # the training mode the step itself chose (the eval-mode check named it 'randomness left on in eval mode')
    assert "WARNING" not in acting
    frozen = zoo_log("classify.py", "silent_validation_leaves_eval.py", "healthy_progressive_freeze.py", restore=True)
    assert "training-mode check" not in frozen and "Epoch 3 evaluation" in frozen  # what no longer trains
    assert nn.Module.train.__module__ == "torch.nn.modules.module"  # the wrapper is gone after quiet runs too


def test_a_train_step_that_switches_to_eval_is_one_problem():
    log = zoo_log("silent_eval_base.py", "silent_eval_train_step_eval.py", num_epochs=1)
    assert "WARNING training-mode check: from train step 2 of epoch 1 on" in log  # the first step's check saw it first
    assert (
        "silent_eval_train_step_eval.py:7 in train_step: model.eval(). (also reported by: training-mode check)" in log
    )
