"""First-step checks never change what the user's code does (issue: checks rerun train_step).

The model counts its forward calls (Python state a probe on the real model would change) and can
raise on its N-th call: the count must equal the real steps, and the error must surface at the
N-th real call, also under ``python -m pdb -c continue`` (post mortem in the user's frame).
"""

from __future__ import annotations

import os
import pdb
import re
import subprocess

import pytest

from conftest import ROOT, TINY_CONFIG, run_rnn, run_script

COUNTING = os.path.join(ROOT, "tests", "data", "counting_model_config.py")


def test_the_model_counts_only_real_steps_and_the_probes_are_reported(tmp_path):
    result = run_rnn(TINY_CONFIG, COUNTING, "++log_verbosity", "5", cwd=str(tmp_path))
    assert result.returncode == 0, result.stderr
    calls, steps = map(int, re.search(r"forward calls (\d+), real steps (\d+)", result.stdout).groups())
    assert calls == steps > 0  # train and dev steps; no probe run touched the model
    moved, train_steps = map(int, re.search(r"moved in place (\d+), train steps (\d+)", result.stdout).groups())
    assert moved == train_steps > 0  # what the probes' copies moved in place in the shared parameters was put back
    # The probe session says how often train_step ran on copies: the unchanged batch, a smaller batch, a few
    # sequences as an evaluation runs them, the first sequence repeated over a batch under two seeds, some
    # sequences together and in two halves, the batch as dev is evaluated, watched and with perfect scores (no class
    # holds half the labels: no run with one class everywhere), and twice in training mode (the forward moves a
    # parameter in training mode only, so the modes are compared).
    assert "First-step checks: train_step ran 12 extra time(s) on copies of the model" in result.stdout
    assert "WARNING" not in result.stdout  # the declared-frozen parameter moved by the model's own code is intended
    assert "Plugin callbacks per event, in the order they run:" in result.stdout


@pytest.mark.slow  # seconds of work: the full suite runs it, the fast subset does not
def test_diagnostics_that_run_the_model_outside_the_first_step_checks_leave_it_alone_too(tmp_path):
    # The layer template (meta dry runs), TensorBoard's graph (a trace) and the float32 comparison (a replay).
    result = run_rnn(
        TINY_CONFIG,
        COUNTING,
        *("++debug_print_layer_output_template", "True", "++tensorboard_dir", str(tmp_path / "tb")),
        *("++torch_amp", "bfloat16", "++debug_amp_check", "True"),
        cwd=str(tmp_path),
    )
    assert result.returncode == 0, result.stderr
    assert "Layer output template" in result.stdout and "Mixed precision check at step" in result.stdout
    calls, steps = map(int, re.search(r"forward calls (\d+), real steps (\d+)", result.stdout).groups())
    assert calls == steps > 0
    moved, train_steps = map(int, re.search(r"moved in place (\d+), train steps (\d+)", result.stdout).groups())
    assert moved == train_steps > 0


def test_an_error_on_the_nth_call_surfaces_at_the_nth_real_step(tmp_path):
    result = run_rnn(TINY_CONFIG, COUNTING, "++fail_at", "3", cwd=str(tmp_path))
    assert result.returncode == 1
    assert "ZeroDivisionError: forward call 3" in result.stderr
    assert "forward calls 3, real steps 3" in result.stdout  # raised in the third real step, not in a probe


def test_reruns_off_runs_no_probe(tmp_path):
    result = run_rnn(TINY_CONFIG, COUNTING, "++debug_first_step_reruns", "False", cwd=str(tmp_path))
    assert result.returncode == 0, result.stderr
    assert "rerun train_step (loss inputs, padding, batch independence, device) are off" in result.stdout
    assert "extra time(s)" not in result.stdout


def test_an_error_in_the_unchanged_probe_run_is_the_users_and_names_the_check(tmp_path):
    # fail_at=1: the probe's copy of the model makes its first call first; the real first step would raise too.
    result = run_rnn(TINY_CONFIG, COUNTING, "++fail_at", "1", cwd=str(tmp_path))
    assert result.returncode == 1
    assert "ZeroDivisionError: forward call 1" in result.stderr
    assert "Raised while the loss-input check ran train_step on a copy of the model" in result.stderr


@pytest.mark.slow  # seconds of work: the full suite runs it, the fast subset does not
def test_pdb_stops_in_the_users_frame_at_the_nth_real_call(tmp_path):
    command = ["-c", "continue", os.path.join(ROOT, "rnn.py"), TINY_CONFIG, COUNTING]  # ``python -m pdb`` forked
    result = run_script(
        pdb.__file__,
        *command,
        "++fail_at",
        "3",
        input="p ('calls', self.calls)\nquit\n",
        timeout=240,
        cwd=str(tmp_path),
    )
    assert "Entering post mortem debugging" in result.stdout, result.stdout[-3000:] + result.stderr[-3000:]
    assert "counting_model_config.py" in result.stdout and "raise ZeroDivisionError" in result.stdout
    assert "('calls', 3)" in result.stdout


PROBE_CASES = os.path.join(ROOT, "tests", "data", "probe_cases_config.py")


def _probe_case(tmp_path, case: str, *more: str) -> subprocess.CompletedProcess:
    return run_rnn(TINY_CONFIG, PROBE_CASES, "++case", repr(case), "++num_epochs", "1", *more, cwd=str(tmp_path))


def test_a_model_that_cannot_be_copied_trains_and_one_line_says_why_nothing_was_probed(tmp_path):
    result = _probe_case(tmp_path, "lock")
    assert result.returncode == 0, result.stderr
    line = next(line for line in result.stdout.splitlines() if line.startswith("First-step checks:"))
    assert "train_step ran 0 extra time(s)" in line and "the model cannot be copied (TypeError" in line


def test_a_model_with_another_eval_api_is_not_blamed_for_the_probes_eval_mode(tmp_path):
    result = _probe_case(tmp_path, "eval_list")
    assert result.returncode == 0, result.stderr
    assert "Raised while" not in result.stderr


def test_a_shape_error_under_the_loss_input_watch_is_the_users_and_named_as_such(tmp_path):
    result = _probe_case(tmp_path, "shape")
    assert result.returncode == 1
    assert "mat1 and mat2 shapes cannot be multiplied" in result.stderr
    assert "Raised while the loss-input check ran train_step on a copy of the model" in result.stderr


def test_the_users_log_records_come_from_the_real_steps_only(tmp_path):
    result = _probe_case(tmp_path, "log")
    assert result.returncode == 0, result.stderr
    logged = re.findall(r"USERLOG forward call (\d+) of shape \((\d+), 4\)", result.stderr)
    assert logged and logged[0] == ("1", "16")  # the first record is the real first step's, batch 16


def test_summaries_logged_in_train_step_do_not_stop_the_probes(tmp_path):
    result = _probe_case(tmp_path, "log_scalar", "++tensorboard_dir", str(tmp_path / "tb"))
    assert result.returncode == 0, result.stderr
    line = next(line for line in result.stdout.splitlines() if line.startswith("First-step checks:"))
    assert "loss-input check 1" in line and "batch-independence check 1" in line
    limits = line.partition("could not check:")[2]
    assert "loss-input" not in limits and "batch-independence" not in limits  # (the meta dry run needs .item())


def _train_in_process(*files: str) -> None:
    from framework.assembly import Engine
    from framework.base.config import load_config

    Engine(load_config([os.path.join(ROOT, "tests", "zoo", f) for f in files], {"model": None, "log": None})).run(
        "train"
    )


def test_a_warning_of_the_users_model_is_shown_once_as_in_a_plain_run(recwarn):
    """The probe runs of the first step must neither swallow the user's warning nor show it twice."""
    _train_in_process("classify.py", "user_warning.py")
    shown = [w for w in recwarn if "user model: inputs are not normalised" in str(w.message)]
    assert len(shown) == 1, [str(w.message) for w in recwarn]
    assert shown[0].filename.endswith("user_warning.py")


@pytest.mark.slow  # BERT's modules imported and trained in this process: about 9 s of CPU
def test_a_library_warning_given_once_is_not_lost_to_the_probe_runs():
    """transformers' warning_once about padded input ids without an attention mask: the shared probe run gives
    it first (a plain run's first step would), and the real step does not repeat it (an lru_cache)."""
    transformers = pytest.importorskip("transformers")
    import logging

    transformers.logging.set_verbosity_warning()
    transformers.utils.logging.warning_once.cache_clear()  # as in a fresh process
    records: list[str] = []
    handler = logging.Handler()
    handler.emit = lambda record: records.append(record.getMessage())
    logger = logging.getLogger("transformers")
    logger.addHandler(handler)
    try:
        _train_in_process("library_warning_no_attention_mask.py")
    finally:
        logger.removeHandler(handler)
    shown = [r for r in records if "We strongly recommend passing in an `attention_mask`" in r]
    assert len(shown) == 1, records


def test_a_copy_given_new_parameters_leaves_the_models_own_alone():
    """model_copy shares the parameters: the checks that scale a copy's weights (score range) or fill its zero
    layers (affine model) replace them in the copy, never write to the shared tensors."""
    import torch

    from framework.check_library.probe import model_copy, replace_parameters

    model = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.Linear(4, 2))
    torch.nn.init.zeros_(model[1].weight)
    before = [p.detach().clone() for p in model.parameters()]
    copy = model_copy(model)
    replace_parameters(copy, lambda p: p * 10 if p is not copy[1].weight else torch.ones_like(p))
    assert all(torch.equal(p, b) for p, b in zip(model.parameters(), before, strict=True))
    assert torch.equal(copy[0].weight, model[0].weight * 10) and bool((copy[1].weight == 1).all())
