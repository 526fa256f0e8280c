"""The pieces of the default bug checks, in process (the zoo runs them as real training processes)."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch import nn

from framework.debug.batch_independence import probe_size
from framework.debug.loss_inputs import _FirstStepWatch, label_entropy, squashing_origin
from framework.debug.split_overlap import overlap_findings
from framework.inspection.module_tracker import ModuleTracker
from framework.inspection.tracebacks import format_compact


def _watch(batch):
    model = nn.Linear(4, 3)
    tracker = ModuleTracker(model)
    return model, tracker, _FirstStepWatch(tracker, batch, ["classes"])


def test_a_softmax_is_found_through_views_and_indexing():
    scores = torch.randn(2, 5, 3, requires_grad=True)
    probs = scores.softmax(-1).reshape(10, 3)[torch.tensor([0, 2, 4])]
    assert squashing_origin(probs)[0] == "softmax"
    assert squashing_origin(scores.log_softmax(-1).transpose(0, 1))[0] == "log_softmax"
    assert squashing_origin(scores * 2) is None  # a real op in between: not a squashing output


def test_nll_loss_of_log_probabilities_is_quiet_and_of_logits_is_named():
    batch = {"classes": torch.tensor([0, 1, 2, 1])}
    model, tracker, watch = _watch(batch)
    with tracker, watch:
        logits = model(torch.randn(4, 4))
        F.nll_loss(F.log_softmax(logits, -1), batch["classes"])
        F.nll_loss(torch.log(torch.softmax(logits, -1)), batch["classes"])
        assert not watch.findings
        F.nll_loss(logits, batch["classes"])
    assert len(watch.findings) == 1 and "raw logits?" in watch.findings[0].message
    assert [c.key for c in watch.class_losses] == ["classes"] * 3  # the target is the batch key


def test_equal_shapes_and_scalar_targets_do_not_count_as_broadcasting():
    _, tracker, watch = _watch({"classes": torch.zeros(4, dtype=torch.long)})
    with tracker, watch:
        F.mse_loss(torch.randn(4, 1), torch.randn(4, 1))
        with pytest.warns(UserWarning, match="target size"):  # to no bigger shape: torch's own warning stays
            F.l1_loss(torch.randn(4, 3), torch.randn(3))
        assert not watch.findings
        with pytest.warns(UserWarning, match="target size"):  # silenced by the probe run, not by the watch
            F.l1_loss(torch.randn(4), torch.randn(4, 1))
    assert "broadcast to [4, 4]" in watch.findings[0].message and watch.broadcasting


def test_backward_inside_the_step_is_recorded_with_its_line():
    _, tracker, watch = _watch({"classes": torch.zeros(4, dtype=torch.long)})
    with tracker, watch:
        torch.randn(3, requires_grad=True).sum().backward()
    assert "test_bug_checks.py" in watch.backward_calls[0] and ".backward()" in watch.backward_calls[0]


def test_label_entropy_is_the_loss_of_predicting_the_frequencies():
    assert math.isclose(label_entropy(np.array([5, 5, 5, 5])), math.log(4))
    assert math.isclose(label_entropy(np.array([9, 1, 0])), -(0.9 * math.log(0.9) + 0.1 * math.log(0.1)))


def test_a_few_natural_duplicates_are_a_note_a_copied_split_a_warning():
    train = (list(range(1000)), False)
    few = overlap_findings(train, {"dev": ([5] + list(range(2000, 2499)), False)})
    assert [f.severity for f in few] == ["note"] and "1 of the 500 sequences of 'dev' (0.2%)" in few[0].message
    many = overlap_findings(train, {"dev": (list(range(0, 40)) + list(range(5000, 5060)), False)})
    assert many[0].severity == "warning" and "dev[0] = train[0]" in many[0].message
    assert overlap_findings(train, {"dev": (list(range(5000, 5100)), False)}) == []


def test_the_probe_batch_size_is_one_no_other_axis_has():
    model = nn.Linear(13, 11)  # 13 and 11 are taken by the parameters
    assert probe_size({"data": torch.zeros(16, 7, 13)}, model, 16) == 5  # 7 is the time axis
    assert probe_size({"data": torch.zeros(2, 13)}, model, 2) == 2


def test_compact_tracebacks_show_user_frames_with_values_and_fold_library_frames():
    def user_code():
        weights = torch.zeros(1000)
        layer = nn.Linear(3, 2)
        return layer(weights)

    try:
        user_code()
    except RuntimeError as exc:
        exc.add_note("[framework] the note")
        text = format_compact(exc)
    assert "in user_code\n    return layer(weights)\n" in text
    assert "layer = <Linear module>" in text and "weights = tensor[1000]" in text and "all_zeros" in text
    assert "library frame(s): torch/nn/modules/module.py" in text
    assert text.rstrip().endswith("[framework] the note") and "\nRuntimeError: " in text
    assert "Linear(in_features" not in text  # never a module's repr, only its settings
    assert "self = <Linear module in_features=3, out_features=2>" in text  # the library frame that uses them
