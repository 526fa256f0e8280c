"""A schedule that ends the updates (framework.debug.stopped_updates): an epoch whose every update applied a learning
rate of 0 after an earlier one trained is a warning, once; a schedule that decays toward 0 only at the end is quiet."""

from __future__ import annotations

import os

from conftest import ROOT, captured_log
from framework.assembly import Engine
from framework.base.config import load_config

CLASSIFY = os.path.join(ROOT, "tests", "zoo", "classify.py")


def _run(schedule, epochs: int = 4) -> str:
    # the zoo's classifier on a tenth of its data: 25 updates an epoch (each epoch's applied rates are what is judged)
    data = {"class": "GaussianClustersDataset", "num_seqs": 200, "dim": 8, "num_classes": 4}
    overrides = {"train": {**data, "split": "train"}, "dev": {**data, "split": "test"}}
    with captured_log(4) as lines:
        Engine(
            load_config(
                [CLASSIFY], {"model": None, "num_epochs": epochs, "dynamic_learning_rate": schedule, **overrides}
            )
        ).run("train")
    return "\n".join(lines)


def _step_decay_by_zero(*, epoch, learning_rate, **_kwargs):
    return learning_rate * 0.0 ** ((epoch - 1) // 2)  # StepLR(step_size=2, gamma=0)


def _cosine_to_zero(*, epoch_continuous, learning_rate, **_kwargs):
    import math

    return learning_rate * 0.5 * (1 + math.cos(math.pi * min(epoch_continuous / 4, 1.0)))


def test_an_epoch_of_zero_rates_after_training_is_named_once_and_a_decay_to_zero_at_the_end_is_not():
    text = _run(_step_decay_by_zero)
    assert text.count("WARNING learning watch: The learning rate applied was 0 in every update of epoch 3") == 1
    assert "(up to 0.01 in epoch 2): the updates stopped" in text and "the 1 epochs left will not change it either unless" in text
    assert "applied was 0 in every update of epoch 4" not in text
    assert "WARNING learning watch: The learning rate applied was 0" not in _run(_cosine_to_zero)
