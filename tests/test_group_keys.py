"""Param groups set apart by a key that the optimizer does not read (framework.debug.group_keys): reported after
epoch 1 when every option the optimizer reads is still the same in all groups; quiet when the key was applied (each
group's rate computed from it, which the schedules then keep) or for the framework's own 'lr_multiplier'."""

from __future__ import annotations

from conftest import zoo_log


def test_a_learning_rate_factor_under_a_key_sgd_does_not_read_is_named_and_an_applied_one_is_not():
    bug = zoo_log("classify.py", "cause_classify_group_lr_mult.py", num_epochs=1)
    assert (
        "The 2 param groups of SGD carry 'lr_mult' with different values (0.1 in 1 group(s), 1 in 1 group(s)), but "
        "after epoch 1 groups 0 and 1 (lr_mult 0.1 and 1) agree in every option SGD reads (lr, momentum, dampening, "
        "weight_decay, nesterov, maximize, ...)" in bug
    )
    assert "Did you mean 'lr_multiplier'?" in bug
    # split into weight decay and no decay groups: two groups the key sets apart still agree in every option read
    split = zoo_log("classify.py", "cause_classify_group_lr_mult.py", decay_split=True, num_epochs=1)
    assert "The 4 param groups of SGD carry 'lr_mult' with different values" in split
    # a class of the config's own may read its own keys in its step
    assert "WARNING" not in zoo_log("classify.py", "cause_classify_group_lr_mult.py", own_class=True, num_epochs=1)
    # a rate the builder computed from the key is the group's own: the schedules keep its ratio to the base rate
    applied = zoo_log("classify.py", "cause_classify_group_lr_mult.py", applied=True, num_epochs=1)
    assert "param group 0 has its own rate 0.001, kept as 0.1x the learning rate" in applied
    assert "WARNING" not in applied
    # the framework's own key is applied by the schedule: each group's rate is the base rate times it
    own = zoo_log(
        "classify.py",
        optimizer={"class": "sgd", "momentum": 0.9, "param_groups": [{"params": "0.*", "lr_multiplier": 0.1}]},
        num_epochs=1,
    )
    assert "WARNING" not in own
