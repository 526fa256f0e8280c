"""Importing a reference implementation and comparing it module by module; the inspection tools."""

import os
import re
import sys

import pytest
import torch

from conftest import ROOT, TINY_CONFIG, run_rnn, run_script
from framework.check_library.tensors import display_path
from framework.model_import import map_parameters, parse_rule

VAE = os.path.join(ROOT, "configs", "vae_mnist.py")
MATH_BUG = os.path.join(ROOT, "configs", "vae_bugs", "math.py")
SHAPE_BUG = os.path.join(ROOT, "configs", "vae_bugs", "shape.py")
REFERENCE = os.path.join(ROOT, "configs", "reference", "vae_reference.py")


def _tool(name, *args, cwd=None):
    return run_script(os.path.join(ROOT, "tools", name), *args, cwd=cwd)


def _reference_weights(tmp_path):
    sys.path.insert(0, os.path.dirname(REFERENCE))
    from vae_reference import Model

    torch.manual_seed(3)
    path = tmp_path / "reference.pt"
    torch.save(Model().state_dict(), path)
    return str(path)


@pytest.mark.slow  # seconds of real runs: the full suite runs it, the fast subset does not
def test_import_then_compare_matches_and_names_the_planted_math_difference(tmp_path):
    weights, imported = _reference_weights(tmp_path), str(tmp_path / "imported.pt")
    reference = ["--reference", f"{REFERENCE}:Model", "--state-dict", weights]
    result = _tool("import-torch-model.py", VAE, *reference, "--out", imported, "--save-mapping", str(tmp_path / "m"))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Encoder.FC_var.weight    -> encoder.log_var.weight  # [20, 400], by shape+order" in result.stdout
    assert torch.equal(
        torch.load(imported)["model"]["encoder.log_var.weight"], torch.load(weights)["Encoder.FC_var.weight"]
    )

    same = _tool("compare-models.py", VAE, "--checkpoint", imported, *reference)
    assert same.returncode == 0, same.stdout + same.stderr
    assert "The models match: 8 module outputs agree (rtol 0.0001, atol 1e-06)." in same.stdout

    planted = _tool("compare-models.py", VAE, MATH_BUG, "--checkpoint", imported, *reference, "--bisect")
    assert planted.returncode == 1, planted.stdout + planted.stderr
    lines = planted.stdout.splitlines()
    assert [line.split()[0] for line in lines if line.endswith("ok")] == [
        "encoder.hidden",
        "encoder.mean",
        "encoder.log_var",
    ]
    assert "First diverging module (in execution order): encoder (reference: Encoder)" in planted.stdout
    assert f"framework aten.randn_like at {display_path(MATH_BUG)}:" in planted.stdout  # the line that lost the exp
    assert (
        f"reference aten.mul at {display_path(REFERENCE)}:" in planted.stdout
        and "std = torch.exp(0.5 * log_var)" in planted.stdout
    )


def test_renamed_parameters_are_mapped_by_rules_where_shape_and_order_would_go_wrong():
    reference = {"second.weight": torch.zeros(4, 4), "first.weight": torch.ones(4, 4)}
    framework = {"layer1.weight": torch.empty(4, 4), "layer2.weight": torch.empty(4, 4)}
    by_order = map_parameters(reference, framework)
    assert by_order.pairs[0] == ("second.weight", "layer1.weight", "shape+order")  # wrong, but all it can know
    rules = [parse_rule(r"^first\.=>layer1."), parse_rule(r"^second\.=>layer2.")]
    by_rule = map_parameters(reference, framework, rules)
    assert sorted(by_rule.pairs) == [
        ("first.weight", "layer1.weight", "rule"),
        ("second.weight", "layer2.weight", "rule"),
    ]
    assert by_rule.complete


def test_a_shape_mismatch_is_reported_not_crashed_on(tmp_path):
    weights = _reference_weights(tmp_path)
    reference = ["--reference", f"{REFERENCE}:Model", "--state-dict", weights]
    result = _tool("import-torch-model.py", VAE, SHAPE_BUG, *reference, "--out", str(tmp_path / "x.pt"))
    assert result.returncode == 1
    assert "shape mismatch: Decoder.FC_output.weight [784, 400] vs decoder.out.weight [784, 20]" in result.stderr
    assert not os.path.exists(tmp_path / "x.pt")
    compared = _tool("compare-models.py", VAE, SHAPE_BUG, *reference)
    assert compared.returncode == 1
    assert (
        "the config's model failed in forward: RuntimeError: mat1 and mat2 shapes cannot be multiplied"
        in compared.stdout
    )
    assert "The 5 module outputs before the failure agree" in compared.stdout


def test_two_configs_are_compared_by_module_path(tmp_path):
    result = _tool("compare-models.py", TINY_CONFIG, "--other", TINY_CONFIG, "--backward")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "The models match: 5 module outputs agree" in result.stdout
    assert re.search(r"^3\.weight +3\.weight +\[3, 8\] +0 +0 +ok$", result.stdout, re.MULTILINE)  # gradients


def test_an_imported_checkpoint_starts_training_and_the_inspection_tools_read_it(tmp_path):
    model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Dropout(0.1), torch.nn.ReLU(), torch.nn.Linear(8, 3))
    torch.save(model.state_dict(), tmp_path / "sd.pt")
    imported = str(tmp_path / "imported.pt")
    assert (
        _tool(
            "import-torch-model.py", TINY_CONFIG, "--state-dict", str(tmp_path / "sd.pt"), "--out", imported
        ).returncode
        == 0
    )
    result = run_rnn(
        TINY_CONFIG, "++import_model_train_epoch1", imported, "++num_epochs", "1", "++model", str(tmp_path / "m")
    )
    assert result.returncode == 0 and f"Training starts from the parameters of {imported}" in result.stdout
    inspected = _tool("inspect-checkpoint.py", str(tmp_path / "m.001.pt"))
    assert inspected.returncode == 0 and "epoch 1: lr 0.01  train_ce " in inspected.stdout
    assert "0.weight  [8, 4]" in inspected.stdout and "all finite" in inspected.stdout
    state = torch.load(tmp_path / "sd.pt")
    state["3.bias"][1] = float("nan")
    torch.save(state, tmp_path / "bad.pt")
    inspected = _tool("inspect-checkpoint.py", str(tmp_path / "bad.pt"))
    assert inspected.returncode == 1 and "1 NaN/Inf!" in inspected.stdout and "NaN/Inf in 3.bias" in inspected.stdout
    stats = _tool("dump-forward-stats.py", TINY_CONFIG, "--checkpoint", str(tmp_path / "m.001.pt"), "--batches", "2")
    assert stats.returncode == 0 and "Module outputs over 2 batches of dev (model(data), eval mode" in stats.stdout
    assert "2 (ReLU)" in stats.stdout and "min +0 " in stats.stdout.split("2 (ReLU)")[1].splitlines()[0]


def test_dump_dataset_shows_keys_ranges_histogram_and_lengths():
    result = _tool("dump-dataset.py", os.path.join(ROOT, "configs", "task12ax_lstm.py"), "--batches", "2")
    assert result.returncode == 0, result.stderr
    assert "Dataset train: Task12AXDataset, 1000 sequences" in result.stdout
    assert "classes: int64, batch shapes" in result.stdout and "histogram: 0: " in result.stdout
    assert "sequence lengths: min " in result.stdout


def test_bad_reference_input_is_a_clear_error_with_exit_status_2(tmp_path):
    missing = _tool("import-torch-model.py", TINY_CONFIG, "--state-dict", str(tmp_path / "nothere.pt"), "--out", "x.pt")
    assert missing.returncode == 2 and f"--state-dict {tmp_path}/nothere.pt: there is no such file." in missing.stderr
    (tmp_path / "junk.pt").write_text("not a checkpoint")
    junk = _tool(
        "compare-models.py", TINY_CONFIG, "--reference", f"{REFERENCE}:Model", "--state-dict", str(tmp_path / "junk.pt")
    )
    assert junk.returncode == 2 and "junk.pt is damaged: it is not an intact zip archive" in junk.stderr
    assert "Traceback" not in missing.stderr + junk.stderr
