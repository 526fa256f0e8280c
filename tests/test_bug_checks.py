"""The pieces of the default bug checks, in process (the zoo runs them as real training processes)."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch import nn

from framework.check_library.module_tracker import ModuleTracker
from framework.check_library.tracebacks import format_compact
from framework.debug.batch_independence import probe_size
from framework.debug.loss_inputs import _FirstStepWatch, label_entropy, squashing_origin
from framework.debug.split_overlap import overlap_findings


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


def _probe_of(model: nn.Module, x: torch.Tensor):
    """The batch-independence probe of one forward of ``model`` on ``x`` (a leaf with gradients)."""
    from framework.debug.batch_independence import _Probe

    probe = _Probe(model, x.shape[0], x)
    handles = [h for m in model.modules() for h in probe.hooks(m)]
    model(x)
    for handle in handles:
        handle.remove()
    return probe


class _SqrtOfZero(nn.Module):
    def forward(self, h):
        return torch.sqrt(h * 0)  # the gradient is inf * 0: NaN for every sequence


def test_a_nan_gradient_ratio_is_not_called_mixing_and_a_real_mix_still_is():
    from framework.debug.batch_independence import first_mixing

    x = torch.randn(5, 4, requires_grad=True)
    assert first_mixing(_probe_of(nn.Sequential(nn.Linear(4, 4), _SqrtOfZero(), nn.Linear(4, 2)), x)) is None

    class OverBatch(nn.Module):
        def forward(self, h):
            return h - h.mean(0)

    found = first_mixing(_probe_of(nn.Sequential(nn.Linear(4, 4), OverBatch(), nn.Linear(4, 2)), x))
    assert found is not None and math.isfinite(found[1])


def test_ctc_loss_takes_its_targets_and_lengths_on_the_cpu_but_not_its_log_probs():
    from framework.check_library.device_tracking import DeviceTracker

    model = nn.Linear(6, 6)
    lengths = torch.tensor([5, 4])
    batch = {"data": torch.randn(2, 5, 6), "classes": torch.tensor([[1, 2], [3, 0]])}
    tracker = ModuleTracker(model)
    devices = DeviceTracker(model, {**batch, "data:seq_len": lengths}, tracker)
    with tracker, devices:
        log_probs = model(batch["data"]).log_softmax(-1).transpose(0, 1)
        F.ctc_loss(log_probs, batch["classes"], lengths, torch.tensor([2, 1]))
    assert devices.finding is None, devices.finding
    devices = DeviceTracker(model, {**batch, "data:seq_len": lengths}, tracker)
    with tracker, devices:
        F.ctc_loss(torch.randn(5, 2, 6).log_softmax(-1), batch["classes"], lengths, torch.tensor([2, 1]))
        model(batch["data"]) + torch.randn(2, 5, 6)  # a CPU tensor beside the model's: still a device bug
    assert devices.finding is not None and "aten.add" in devices.finding


def test_an_imbalance_is_a_note_and_a_label_that_differs_only_along_the_split_too():
    from framework.check_library.data_checks import balance_findings, split_keys

    [note] = balance_findings("classes", {"train": (np.array([950, 50]), "train")})
    assert note.severity == "note" and "imbalanced" in note.message
    classes = {"train": (np.array([400, 400, 400]), "train"), "dev": (np.array([130, 140, 130]), "dev")}
    domain = {"train": (np.array([1200, 800]), "train"), "dev": (np.array([0, 400]), "dev")}
    shifts = {
        key: any(f.severity != "note" for f in balance_findings(key, c))
        for key, c in [("classes", classes), ("domain", domain)]
    }
    assert shifts == {"classes": False, "domain": True} and split_keys(shifts) == {"domain"}
    found = balance_findings("domain", domain, split_along=True)
    assert found and all(f.severity == "note" and "by design" in f.message for f in found)
    assert split_keys({"classes": True}) == set()  # the only label differs: a bad split, still a warning


def test_labels_masked_by_value_are_told_from_another_key_of_as_many_classes():
    from framework.debug.loss_inputs import _made_from

    rng = torch.Generator().manual_seed(0)
    tokens = torch.randint(0, 24, (4, 12), generator=rng)
    labels = tokens.clone()
    labels[tokens == 3] = -100  # a pad id that is also a real token, masked by value
    assert _made_from(labels, {"data": tokens}, "data", -100)
    assert _made_from(labels[:, 1:], {"data": tokens}, "data", -100)  # shifted for a next-token loss
    # a link prediction's head entity beside its target entity: as many classes, other values
    head, tail = torch.randint(0, 24, (64,), generator=rng), torch.randint(0, 24, (64,), generator=rng)
    assert not _made_from(tail, {"head": head, "classes": tail}, "head", -100)
    assert _made_from(tail, {"head": head, "classes": tail}, "classes", -100)
