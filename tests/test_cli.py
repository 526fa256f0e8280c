"""``rnn.py`` end to end, as real subprocesses: training, logs, resume, errors, forward, debugger."""

import os
import re
import signal

import numpy as np
import pytest
import torch

from conftest import FAILING_TRAIN_STEP, ROOT, TINY_CONFIG, run_rnn, start_rnn, tiny_config_with
from framework.base.log import TIME_PREFIX

STEP_LINE = re.compile(
    r"^ep 1 train, step 3, ce \d+\.\d{3}, fer \d+\.\d{3}, \d+\.\d{3} sec/step, elapsed \d+:\d\d:\d\d, "
    r"exp\. remaining \d+:\d\d:\d\d, complete \d+\.\d\d%, time data [\d.]+ms forward [\d.]+ms backward "
    r"[\d.]+ms optimizer [\d.]+ms$",
    re.MULTILINE,
)


def _model_state(path):
    return torch.load(path, map_location="cpu", weights_only=True)["model"]


def test_train_logs_steps_and_epochs_to_stdout_and_log_file(tmp_path):
    log_file = tmp_path / "logs" / "train.log"
    result = run_rnn(TINY_CONFIG, "++model", str(tmp_path / "model"), "++log", str(log_file), "++log_verbosity", "5")
    assert result.returncode == 0, result.stderr
    assert STEP_LINE.search(result.stdout), result.stdout
    assert re.search(r"^Epoch 2 evaluation: dev: ce \d+\.\d{3} fer \d+\.\d{3}$", result.stdout, re.MULTILINE)
    assert re.sub(TIME_PREFIX, "", log_file.read_text(), flags=re.MULTILINE) == result.stdout  # with the time
    assert sorted(os.listdir(tmp_path)) == ["findings.jsonl", "logs", "metrics.jsonl", "model.001.pt", "model.002.pt"]
    state = torch.load(tmp_path / "model.002.pt", weights_only=True)
    assert (
        state["epoch"] == 2
        and state["global_step"] == 20
        and set(state) >= {"optimizer", "rng", "learning_rate_control"}
    )


def test_rerun_resumes_from_the_newest_checkpoint_and_appends_to_the_log(tmp_path):
    args = [TINY_CONFIG, "++model", str(tmp_path / "model"), "++log", str(tmp_path / "train.log")]
    assert run_rnn(*args).returncode == 0
    first_log = (tmp_path / "train.log").read_text()
    result = run_rnn(*args)
    assert result.returncode == 0 and "Training is complete" in result.stdout
    result = run_rnn(*args, "++num_epochs", "3")
    assert result.returncode == 0
    assert "Resuming from" in result.stdout and "model.002.pt: epoch 2, global step 20" in result.stdout
    assert "Epoch 1 train" not in result.stdout and "Epoch 3 train" in result.stdout
    assert (tmp_path / "train.log").read_text().startswith(first_log)


@pytest.mark.slow  # seconds of real runs: the full suite runs it, the fast subset does not
def test_runs_of_different_configs_and_debug_flags_write_to_their_own_directories(tmp_path):
    # A config that names its outputs the way the shipped ones do, and a second file that changes it.
    base = tiny_config_with(
        tmp_path, "\nfrom framework.base.config import run_output_dir\nmodel = run_output_dir() + '/model'\n"
    )
    variant = tmp_path / "wider.py"
    variant.write_text("learning_rate = 0.05\n")
    assert run_rnn(base, cwd=tmp_path).returncode == 0
    rerun = run_rnn(base, cwd=tmp_path)
    assert rerun.returncode == 0 and "Training is complete: output/config/model.002.pt is epoch 2 of 2" in rerun.stdout
    assert "++num_epochs 7" in rerun.stdout and "++output_dir" in rerun.stdout
    assert run_rnn(base, str(variant), cwd=tmp_path).returncode == 0
    flagged = run_rnn(base, "++debug_print_layer_output_template", "True", cwd=tmp_path)
    assert flagged.returncode == 0 and "Training is complete" not in flagged.stdout
    assert run_rnn(base, "++output_dir", "'elsewhere'", cwd=tmp_path).returncode == 0
    assert sorted(os.listdir(tmp_path / "output")) == [
        "config",
        "config+debug_print_layer_output_template=True",
        "config+wider",
    ]
    assert (tmp_path / "elsewhere" / "model.002.pt").exists()


@pytest.mark.slow
def test_sigkill_at_any_moment_then_resume_ends_with_the_uninterrupted_parameters(tmp_path):
    reference = run_rnn(TINY_CONFIG, "++model", str(tmp_path / "ref" / "model"), "++num_epochs", "4")
    assert reference.returncode == 0, reference.stderr
    prefix = tmp_path / "run" / "model"
    args = [TINY_CONFIG, "++model", str(prefix), "++num_epochs", "4", "++step_sleep", "0.02"]
    # Killed mid-epoch 2, then (resumed from model.001.pt) right after model.003.pt is written.
    for kill_after in ["ep 2 train, step 3,", f"Saved checkpoint {prefix}.003.pt"]:
        process = start_rnn(*args, "++log_verbosity", "5")
        assert any(line.startswith(kill_after) for line in process.stdout), f"{kill_after!r} never appeared"
        process.send_signal(signal.SIGKILL)
        process.communicate()
    with open(f"{prefix}.004.pt.tmp99999", "wb") as f:  # what a kill during a checkpoint write leaves
        f.write(b"half a checkpoint")
    resumed = run_rnn(*args)
    assert resumed.returncode == 0, resumed.stderr
    assert "Resuming from" in resumed.stdout and not os.path.exists(f"{prefix}.004.pt.tmp99999")
    expected, actual = _model_state(tmp_path / "ref" / "model.004.pt"), _model_state(f"{prefix}.004.pt")
    assert all(torch.equal(expected[k], actual[k]) for k in expected)


def test_corrupted_checkpoint_is_reported_and_left_untouched(tmp_path):
    assert run_rnn(TINY_CONFIG, "++model", str(tmp_path / "model"), "++num_epochs", "1").returncode == 0
    path = tmp_path / "model.001.pt"
    damaged = path.read_bytes()[:500]
    path.write_bytes(damaged)
    result = run_rnn(TINY_CONFIG, "++model", str(tmp_path / "model"))
    assert result.returncode == 2
    assert "model.001.pt is damaged: it is not an intact zip archive" in result.stderr and "Traceback" not in (
        result.stderr
    )
    assert path.read_bytes() == damaged


def test_checkpoint_that_does_not_fit_the_model_lists_the_mismatches(tmp_path):
    assert run_rnn(TINY_CONFIG, "++model", str(tmp_path / "model"), "++num_epochs", "1").returncode == 0
    before = (tmp_path / "model.001.pt").read_bytes()
    result = run_rnn(TINY_CONFIG, "++model", str(tmp_path / "model"), "++hidden", "5")
    assert result.returncode == 2
    assert "shape mismatch: 0.weight: checkpoint (8, 4) vs model (5, 4)" in result.stderr
    assert (tmp_path / "model.001.pt").read_bytes() == before


def test_config_errors_exit_with_code_2_and_a_clear_message(tmp_path):
    result = run_rnn(str(tmp_path / "missing.py"))
    assert result.returncode == 2 and "does not exist" in result.stderr
    result = run_rnn(TINY_CONFIG, "++learning_rate_contrl", "'newbob'")
    assert result.returncode == 2 and "Did you mean 'learning_rate_control'" in result.stderr
    bad = tiny_config_with(tmp_path, "\nbatch_size = 'big'\n")
    result = run_rnn(bad)
    assert result.returncode == 2 and "'batch_size' expects int | float | dict, but got str 'big'" in result.stderr
    result = run_rnn(TINY_CONFIG, "++train", "{'class': 'MnistDataSet'}", "++model", str(tmp_path / "m"))
    assert result.returncode == 2 and "Did you mean 'MnistDataset'" in result.stderr
    result = run_rnn(TINY_CONFIG, "++train", f"{{'class': 'MnistDataset', 'path': '{tmp_path}/nope'}}")
    assert result.returncode == 2 and "is not a directory" in result.stderr
    assert "Traceback" not in result.stderr


def test_labels_outside_sparse_dim_stop_before_the_first_step(tmp_path):
    config = tiny_config_with(
        tmp_path,
        (
            "\nimport numpy as np\n"
            "_labels = np.arange(40) % 3\n"
            "_labels[17] = 3\n"
            "train = {'class': 'NumpyDataset', 'arrays': {'data': np.ones((40, 4), 'float32'), 'classes': _labels}}\n"
        ),
    )
    result = run_rnn(config, "++model", str(tmp_path / "model"), "++log_verbosity", "5")
    assert result.returncode == 2
    assert "key 'classes' has the value 3 at sequence index 17, outside [0, 3)" in result.stderr
    assert "ep 1 train" not in result.stdout and not os.path.exists(tmp_path / "model.001.pt")


def test_void_labels_are_accepted_where_the_loss_ignores_them(tmp_path):
    # -100 (cross_entropy's default ignore_index, with which Hugging Face pads labels) and 255 (the void label of
    # VOC-style segmentation) mark "no label here"; the loss must say it ignores them.
    def config(void: int, ignore: str) -> str:
        return tiny_config_with(
            tmp_path,
            (
                "\nimport numpy as np\n"
                "_labels = np.arange(40) % 3\n"
                f"_labels[::7] = {void}\n"
                "train = {'class': 'NumpyDataset', 'arrays': {'data': np.ones((40, 4), 'float32'), 'classes': _labels}}\n"
                "def train_step(*, model, extern_data, run_ctx, **_kwargs):\n"
                "    logits = model(extern_data['data'])\n"
                f"    loss = nn.functional.cross_entropy(logits, extern_data['classes']{ignore})\n"
                "    run_ctx.mark_as_loss(name='ce', loss=loss)\n"
            ),
        )

    for void, ignore in ((-100, ""), (255, ", ignore_index=255")):
        result = run_rnn(config(void, ignore), "++model", str(tmp_path / f"m{void}"), "++num_epochs", "1")
        assert result.returncode == 0, result.stderr[-2000:]
    result = run_rnn(config(255, ""), "++model", str(tmp_path / "m"), "++num_epochs", "1")
    assert result.returncode != 0
    assert result.returncode == 2
    assert "gets the void label 255 among its targets, but its ignore_index is -100" in (result.stderr)
    assert "pass ignore_index=255" in result.stderr


def test_forward_writes_outputs_and_eval_scores_a_checkpoint(tmp_path):
    prefix = str(tmp_path / "model")
    assert run_rnn(TINY_CONFIG, "++model", prefix).returncode == 0
    result = run_rnn(TINY_CONFIG, "++model", prefix, "++task", "'forward'", "++forward_data", "'dev'")
    assert result.returncode == 0, result.stderr
    out = np.load(f"{prefix}.002.forward.npz")
    assert out["logits"].shape == (40, 3) and sorted(out["seq_index"]) == list(range(40))
    result = run_rnn(TINY_CONFIG, "++model", prefix, "++task", "'eval'", "++load_epoch", "1")
    assert result.returncode == 0 and re.search(r"Evaluation of epoch 1: dev: ce \d", result.stdout)
    result = run_rnn(TINY_CONFIG, "++model", prefix, "++task", "forward")  # forward_data is 'eval', not set
    assert result.returncode == 2
    assert "runs on dataset 'eval' (option forward_data), which is not set: add ++forward_data dev" in result.stderr


def test_forward_of_variable_length_outputs_keeps_sequence_lengths(tmp_path):
    config = os.path.join(ROOT, "configs", "task12ax_lstm.py")
    prefix = str(tmp_path / "model")
    common = [
        "++model",
        prefix,
        "++train",
        "{'class': 'Task12AXDataset', 'num_seqs': 40}",
        "++dev",
        "{'class': 'Task12AXDataset', 'num_seqs': 10, 'fixed_random_seed': 5}",
    ]
    assert run_rnn(config, *common, "++num_epochs", "1").returncode == 0
    result = run_rnn(
        config, *common, "++task", "'forward'", "++forward_data", "'dev'", "++output_file", f"{prefix}.npz"
    )
    assert result.returncode == 0, result.stderr
    out = np.load(f"{prefix}.npz")
    lengths = out["prob_target:seq_len"]
    assert len(lengths) == 10 and out["prob_target"].shape == (lengths.sum(),)
    assert lengths.min() >= 10 and np.all((out["prob_target"] >= 0) & (out["prob_target"] <= 1))


def test_exception_in_user_code_keeps_its_traceback_and_exits_non_zero(tmp_path):
    config = tiny_config_with(tmp_path, FAILING_TRAIN_STEP)
    result = run_rnn(config)
    assert result.returncode == 1
    assert "RuntimeError: boom in user code: found-me" in result.stderr
    assert re.search(rf'File "[^"]*{os.path.basename(config)}", line \d+, in train_step', result.stderr)
    assert "secret_local = 'found-me'" in result.stderr  # the variables of the failing line of the user's frame
    assert "library frame(s): " in result.stderr and "module.py" not in result.stderr.split("RuntimeError")[0][-2000:]
    assert "reaches your code" not in result.stderr  # raised in the user's frame: a debugger opens there
    # tests/test_debugger_frames.py runs it under python -m pdb and ipython --pdb.
