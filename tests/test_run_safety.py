"""Runs never lose work when misused: one writer per model prefix, bad values refused before anything
is loaded, changed options named on resume, unwritable or full disks found early, every ending logged.

Real processes throughout: two rnn.py runs racing for a lock, tmpfs mounts in a private mount
namespace for read-only and full disks, real signals.
"""

import collections
import json
import os
import shutil
import signal
import subprocess
import sys
import time

import pytest
import torch
from devkit.preloaded import run_rnn_on_tmpfs

from conftest import (
    FAILING_TRAIN_STEP,
    ROOT,
    TINY_CONFIG,
    run_rnn,
    run_script,
    start_rnn,
    tiny_config_with,
    write_config,
)
from framework.base.config import load_config
from framework.base.errors import ConfigError
from framework.testing import checkpoint_differences
from framework.training import checkpoint

RNN = os.path.join(ROOT, "rnn.py")
CHECK_RESUME = os.path.join(ROOT, "tools", "check-resume.py")


def _wait_for_file(path, process=None, timeout: float = 60) -> None:
    deadline = time.time() + timeout
    while not os.path.exists(path):
        assert process is None or process.poll() is None, f"the run ended early: {process.communicate()}"
        assert time.time() < deadline, f"{path} did not appear"
        time.sleep(0.005)


def _config_holding_at(tmp_path, hook: str) -> tuple[str, str, str]:
    """A tiny config that, at ``hook`` ('step_start' or the startup callback), says so in a file and waits
    on a FIFO: the run is alive at a known point until the test writes to the FIFO or kills it."""
    marker, fifo = str(tmp_path / "holding"), str(tmp_path / "release")
    os.mkfifo(fifo)
    # System calls only (no Python frame of io or codecs once the marker is visible): a signal the test sends then
    # lands in the hook's own frame.
    body = (
        f"    _os.close(_os.open({marker!r}, _os.O_CREAT | _os.O_WRONLY))\n"
        f"    _os.read(_os.open({fifo!r}, _os.O_RDONLY), 1)\n"
    )
    if hook == "startup":
        extra = f"\nimport os as _os\ndef startup_callback(**_kwargs):\n{body}"
    else:
        extra = (
            f"\nimport os as _os\n_held = []\ndef _hold(state):\n    if _held:\n        return\n    _held.append(1)\n{body}"
            f"callbacks = {{'{hook}': _hold}}\n"
        )
    return tiny_config_with(tmp_path, extra), marker, fifo


def _dead_pid() -> int:
    process = subprocess.Popen([sys.executable, "-c", "pass"])
    process.wait()
    return process.pid


# ---------------------------------------------------------------------------------------- the lock
@pytest.mark.slow
def test_a_second_run_on_the_same_model_exits_2_naming_the_first_and_a_dead_run_never_blocks(tmp_path):
    config, holding, _ = _config_holding_at(tmp_path, "step_start")
    prefix = str(tmp_path / "out" / "model")
    log_file = tmp_path / "out" / "train.log"
    first = start_rnn(config, "++model", prefix, "++log", str(log_file))
    try:
        _wait_for_file(holding, first)
        live_tmp, dead_tmp = f"{prefix}.001.pt.tmp{first.pid}", f"{prefix}.001.pt.tmp{_dead_pid()}"
        for path in (live_tmp, dead_tmp):
            with open(path, "wb") as f:
                f.write(b"a checkpoint being written")

        live_log = log_file.read_text()
        second = run_rnn(TINY_CONFIG, "++model", prefix, "++log", str(log_file))
        assert second.returncode == 2, second.stderr
        assert f"Another run is training model {prefix!r}: pid {first.pid}" in second.stderr
        assert "rnn.py" in second.stderr and "Traceback" not in second.stderr
        assert log_file.read_text() == live_log  # the refused run wrote nothing into the live run's log
        assert "Run summary: failed: ModelInUseError" in second.stdout  # its own output says it all
        assert os.path.exists(live_tmp) and not os.path.exists(f"{prefix}.001.pt")

        checkpoint.remove_stale_temp_files(prefix)  # as a later run's startup does
        assert os.path.exists(live_tmp) and not os.path.exists(dead_tmp)
    finally:
        first.kill()
        first.communicate()
    assert os.path.exists(f"{prefix}.lock")  # left by the killed run; it must not block
    third = run_rnn(TINY_CONFIG, "++model", prefix, "++num_epochs", "1")
    assert third.returncode == 0, third.stderr
    assert os.path.exists(f"{prefix}.001.pt") and not os.path.exists(live_tmp)  # its writer is gone now
    assert not os.path.exists(f"{prefix}.lock")  # a run that ends removes its lock


@pytest.mark.slow
def test_eval_and_forward_do_not_take_the_lock(tmp_path):
    prefix = str(tmp_path / "model")
    assert run_rnn(TINY_CONFIG, "++model", prefix, "++num_epochs", "1").returncode == 0
    config, holding, _ = _config_holding_at(tmp_path, "step_start")
    training = start_rnn(config, "++model", prefix, "++num_epochs", "2")
    try:
        _wait_for_file(holding, training)
        result = run_rnn(TINY_CONFIG, "++model", prefix, "++task", "eval")
        assert result.returncode == 0 and "Evaluation of epoch 1" in result.stdout, result.stderr
    finally:
        training.kill()
        training.communicate()


# ------------------------------------------------------------------------------ values and names
@pytest.mark.parametrize(
    "option, value, message",
    [
        ("batch_size", "0", "'batch_size' (Max padded frames"),
        ("batch_size", "-5", "must be in [1, inf), but got -5"),
        ("num_epochs", "0", "'num_epochs' (Number of (sub-)epochs to train) must be in [1, inf), but got 0"),
        ("num_epochs", "-3", "must be in [1, inf), but got -3"),
        ("learning_rate", "-0.1", "'learning_rate' (Initial learning rate) must be in [0, inf), but got -0.1"),
        ("learning_rates", "[0.1, -1]", "must be in [0, inf), but got -1 (element -1 of [0.1, -1])"),
        ("accum_grad_multiple_step", "0", "must be in [1, inf), but got 0"),
        ("newbob_learning_rate_decay", "1.5", "must be in (0, 1], but got 1.5"),
        ("gradient_clip_global_norm", "-1", "must be in [0, inf), but got -1"),
        ("max_seqs", "0", "must be in [1, inf), but got 0"),
    ],
)
def test_values_outside_their_range_exit_2_before_anything_is_loaded(tmp_path, option, value, message):
    result = run_rnn(TINY_CONFIG, "++model", str(tmp_path / "model"), f"++{option}", value)
    assert result.returncode == 2 and message in result.stderr, result.stderr
    assert f"(from ++{option})" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1 and "Traceback" not in result.stderr
    assert result.stdout == "" and os.listdir(tmp_path) == []  # no log line, no data, no files


def test_a_builtin_dataset_refusing_its_parameters_is_a_config_error(tmp_path):
    spec = "{'class': 'GaussianClustersDataset', 'num_seqs': -5}"
    result = run_rnn(TINY_CONFIG, "++train", spec, "++model", str(tmp_path / "model"))
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert "ERROR: train: GaussianClustersDataset cannot be built with {'num_seqs': -5" in result.stderr


def test_nan_is_refused_for_any_number_option(tmp_path):
    config = tiny_config_with(tmp_path, "\nlearning_rate = float('nan')\n")
    with pytest.raises(ConfigError, match="option 'learning_rate' is NaN"):
        load_config([config])


def test_legal_but_absurd_values_are_warned_about_and_a_healthy_run_is_not(tmp_path):
    zero = run_rnn(TINY_CONFIG, "++learning_rate", "0", "++num_epochs", "1")
    assert zero.returncode == 0, zero.stderr
    assert (
        "WARNING unusual option values: the learning rate is 0: the optimizer will not change the parameters"
        in zero.stdout
    )
    huge = run_rnn(TINY_CONFIG, "++batch_size", str(10**15), "++num_epochs", "1")
    assert huge.returncode == 0, huge.stderr
    assert (
        f"WARNING unusual option values: batch_size {10**15} puts all 160 train sequences into one batch: one update"
        in huge.stdout
    )
    healthy = run_rnn(TINY_CONFIG, "++num_epochs", "1")
    assert "learning rate is 0" not in healthy.stdout and "one update per epoch" not in healthy.stdout


def test_names_that_look_like_options_are_refused_in_config_files_and_helpers_stay_free(tmp_path):
    config = tiny_config_with(
        tmp_path,
        "\ndebug_check_numerics = True\nlr_shedule = 'cosine'\nbatch_sizes = [8, 16]\n"
        "num_layers = 3\n_private = 1\nlr_peak = 1e-2\nlearning_rate_warmup_steps = 5\n"
        "def debug_print_stats(x):\n    return x\n"
        "def dynamic_learning_rate(*, global_train_step, **_kwargs):\n"
        "    return lr_peak * min(1.0, (global_train_step + 1) / config.int('learning_rate_warmup_steps'))\n",
    )
    with pytest.raises(ConfigError) as error:
        load_config([config])
    message = str(error.value)
    assert "'debug_check_numerics' is not an option, though its name looks like one" in message
    assert "'debug_check_numerics_nan_only'" in message  # the closest real ones are named
    assert "'lr_shedule' is not an option" in message
    assert "'batch_sizes' is not an option; did you mean 'batch_size'?" in message
    for free in ("num_layers", "_private", "lr_peak", "learning_rate_warmup_steps", "debug_print_stats"):
        assert f"'{free}'" not in message
    result = run_rnn(config)
    assert result.returncode == 2 and "'lr_shedule' is not an option" in result.stderr


def test_a_directory_given_as_config_file_is_named_as_such(tmp_path):
    write_config(tmp_path, "task = 'train'\n", name="setup.py")
    result = run_rnn(str(tmp_path))
    assert result.returncode == 2
    assert f"Config file {str(tmp_path)!r} is a directory; give the config file in it. It holds setup.py." in (
        result.stderr
    )


def test_a_checkpoint_with_code_in_it_is_refused_without_advising_to_run_that_code(tmp_path):
    assert run_rnn(TINY_CONFIG, "++model", str(tmp_path / "model"), "++num_epochs", "1").returncode == 0
    saved = torch.load(tmp_path / "model.001.pt", weights_only=True)
    saved["payload"] = shutil.rmtree  # unpickling this would import and reference a function
    torch.save(saved, tmp_path / "model.002.pt")
    result = run_rnn(TINY_CONFIG, "++model", str(tmp_path / "model"))
    assert result.returncode == 2
    assert "model.002.pt cannot be read (it holds Python objects other than tensors" in result.stderr
    assert "shutil" in result.stderr and "weights_only=False" not in result.stderr


# --------------------------------------------------------------------------------------- resume
def test_resume_names_each_changed_option_and_the_learning_rate_rule(tmp_path):
    args = [TINY_CONFIG, "++model", str(tmp_path / "model")]
    assert run_rnn(*args, "++num_epochs", "1").returncode == 0
    result = run_rnn(*args, "++num_epochs", "2", "++learning_rate", "0.5", "++batch_size", "8")
    assert result.returncode == 0, result.stderr
    lines = [line for line in result.stdout.splitlines() if line.startswith("Option ")]
    assert lines == [
        "Option batch_size changed since the checkpoint: 16 there, 8 now; using 8.",
        "Option learning_rate changed since the checkpoint: 0.01 there, 0.5 now; the checkpoint's learning-rate "
        "state wins (epoch 2: 0.01); add ++resume_learning_rate config to use the new value.",
        "Option num_epochs changed since the checkpoint: 1 there, 2 now; using 2.",
    ]
    assert "Epoch 2 train:" in result.stdout and ", lr 0.01" in result.stdout
    result = run_rnn(*args, "++num_epochs", "3", "++learning_rate", "0.5", "++resume_learning_rate", "config")
    assert "resume_learning_rate = 'config': epoch 3 starts at learning rate 0.5." in result.stdout
    assert "Epoch 3 train:" in result.stdout and ", lr 0.5" in result.stdout


# ----------------------------------------------------------------------------------------- disks
def _mount_namespace_works() -> bool:
    if shutil.which("unshare") is None:
        return False
    probe = subprocess.run(["unshare", "-rm", "true"], capture_output=True)
    return probe.returncode == 0


needs_mounts = pytest.mark.skipif(not _mount_namespace_works(), reason="needs unshare -rm (user namespaces)")


def _run_on_tmpfs(tmp_path, mount_options: str, *args: str) -> tuple[subprocess.CompletedProcess, str]:
    """rnn.py ARGS with ``tmp_path/disk`` a tmpfs of its own (private mount namespace); what was on it
    afterwards is copied to the returned directory. The run is forked from the preloaded server (devkit's
    run_rnn_on_tmpfs: the namespace and the mount are ``unshare -rm`` and ``mount -t tmpfs``'s system calls)."""
    disk, after = tmp_path / "disk", tmp_path / "after"
    disk.mkdir()
    after.mkdir()
    result = run_rnn_on_tmpfs(str(disk), mount_options, str(after), *args)
    assert result.returncode != 99, result.stderr
    return result, str(after)


@pytest.mark.slow  # seconds of real runs: the full suite runs it, the fast subset does not
@needs_mounts
def test_a_read_only_model_directory_is_found_before_anything_is_loaded(tmp_path):
    result, _ = _run_on_tmpfs(tmp_path, "ro,size=1m", TINY_CONFIG, "++model", str(tmp_path / "disk" / "model"))
    assert result.returncode == 2, result.stderr
    assert f"The model directory {str(tmp_path / 'disk')!r} cannot be written (Read-only file system)" in (
        result.stderr
    )
    assert "Dataset train" not in result.stdout and "Traceback" not in result.stderr


@pytest.mark.slow  # seconds of work: the full suite runs it, the fast subset does not
@needs_mounts
def test_a_disk_too_small_for_a_checkpoint_is_found_at_startup(tmp_path):
    args = [TINY_CONFIG, "++model", str(tmp_path / "disk" / "model"), "++hidden", "2000"]
    result, after = _run_on_tmpfs(tmp_path, "size=128k", *args)
    assert result.returncode == 2, result.stderr
    assert "free, but a checkpoint of this model needs about 187.5 KB" in result.stderr
    assert "ep 1" not in result.stdout and os.listdir(after) == []


@pytest.mark.slow  # seconds of work: the full suite runs it, the fast subset does not
@needs_mounts
def test_a_full_disk_at_a_checkpoint_names_the_reason_removes_the_partial_file_and_keeps_earlier_ones(tmp_path):
    log_file = tmp_path / "train.log"
    args = [TINY_CONFIG, "++model", str(tmp_path / "disk" / "model"), "++hidden", "2000", "++log", str(log_file)]
    result, after = _run_on_tmpfs(tmp_path, "size=320k", *args)
    assert result.returncode == 1, result.stderr
    message = f"ERROR: Writing checkpoint {tmp_path / 'disk' / 'model.002.pt'} failed: No space left on device"
    assert message in result.stderr and "The partial file was removed" in result.stderr
    assert "Earlier checkpoints are untouched (newest: " in result.stderr and "Traceback" not in result.stderr
    # no temp file, no lock; the metrics of the epoch it trained are kept (what 'framework report' draws), the failure
    # is a finding, and the page says so
    assert sorted(os.listdir(after)) == ["findings.jsonl", "metrics.jsonl", "model.001.pt", "report.html"]
    with open(os.path.join(after, "findings.jsonl"), encoding="utf-8") as f:
        assert json.loads(f.readline())["message"].startswith("The run failed at epoch 2, global step 20: WriteError: ")
    assert torch.load(os.path.join(after, "model.001.pt"), weights_only=True)["epoch"] == 1
    assert message in log_file.read_text()


# Fills the model directory's disk at the first step of epoch 2: the next metrics write meets a full disk.
_FILL_DISK_IN_EPOCH_2 = """
import os as _os
def _fill(state):
    filler = _os.path.join(_os.path.dirname(state.config.get("model")), "filler")
    if state.epoch == 2 and not _os.path.exists(filler):
        fd = _os.open(filler, _os.O_WRONLY | _os.O_CREAT)
        try:
            while True:
                _os.write(fd, b"x" * 512)
        except OSError:
            _os.close(fd)
callbacks = {"step_start": _fill}
batch_size = 1
"""


@pytest.mark.slow  # seconds of work: the full suite runs it, the fast subset does not
@needs_mounts
@pytest.mark.parametrize(
    "writer, extra, message",
    [
        ("metrics", "", "Writing the metrics file {disk}/metrics.jsonl failed: No space left on device; "),
        (
            "TensorBoard",
            "\nmetrics_file = False\ntensorboard_dir = {tb!r}\n",
            "Writing the TensorBoard event files in {disk}/tb failed: No space left on device. ",
        ),
    ],
)
def test_a_full_disk_while_records_are_written_ends_the_run_with_one_line_and_every_file_valid(
    tmp_path, writer, extra, message
):
    disk = tmp_path / "disk"
    config = tiny_config_with(tmp_path, _FILL_DISK_IN_EPOCH_2 + extra.format(tb=str(disk / "tb")))
    result, after = _run_on_tmpfs(tmp_path, "size=2m", config, "++model", str(disk / "model"))
    assert result.returncode == 1, result.stderr
    assert result.stderr.startswith("ERROR: " + message.format(disk=disk)), result.stderr
    assert len(result.stderr.strip().splitlines()) == 1 and "Traceback" not in result.stderr
    assert checkpoint.load_checkpoint(os.path.join(after, "model.001.pt"))["epoch"] == 1
    if writer == "metrics":
        with open(os.path.join(after, "metrics.jsonl"), "rb") as f:
            records = [json.loads(line) for line in f.read().splitlines()]  # every line whole
        assert [r["kind"] for r in records].count("epoch") == 1


def test_an_unwritable_log_file_exits_2_with_the_reason(tmp_path):
    (tmp_path / "file").write_text("not a directory")
    result = run_rnn(TINY_CONFIG, "++log", str(tmp_path / "file" / "train.log"))
    assert result.returncode == 2 and "The log file" in result.stderr and "cannot be written (" in result.stderr
    assert "Traceback" not in result.stderr


# ----------------------------------------------------------------------------- logged endings
def test_an_exception_in_user_code_is_written_to_the_log_with_the_frameworks_note(tmp_path):
    log_file = tmp_path / "train.log"
    result = run_rnn(tiny_config_with(tmp_path, FAILING_TRAIN_STEP), "++log", str(log_file))
    assert result.returncode == 1
    text = log_file.read_text()
    assert "FATAL: the run ended with RuntimeError:" in text and "boom in user code: found-me" in text
    assert "[framework] raised during train step at epoch 1, global step 0" in text


@pytest.mark.slow  # seconds of real runs: the full suite runs it, the fast subset does not
def test_sigterm_outside_training_is_logged_with_where_the_run_was(tmp_path):
    config, holding, _ = _config_holding_at(tmp_path, "startup")
    log_file = tmp_path / "train.log"
    process = start_rnn(config, "++log", str(log_file), cwd=str(tmp_path))
    try:
        _wait_for_file(holding, process)
        process.send_signal(signal.SIGTERM)
        _, stderr = process.communicate(timeout=60)
    finally:
        process.kill()
    assert process.returncode == 128 + signal.SIGTERM, stderr
    assert "Terminated by SIGTERM in startup_callback (" in stderr
    assert "Terminated by SIGTERM in startup_callback (" in log_file.read_text()


def test_a_second_ctrl_c_during_a_checkpoint_write_takes_effect_after_the_write(tmp_path):
    class SendsCtrlC:
        """Pickled in the middle of the state: the signal lands while torch.save writes."""

        def __reduce__(self):
            os.kill(os.getpid(), signal.SIGINT)
            return (collections.OrderedDict, ())

    path = str(tmp_path / "model.interrupted.pt")
    state = {"model": {"w": torch.ones(1000)}, "epoch": 3, "signal": SendsCtrlC(), "after": torch.zeros(1000)}
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)  # what a second Ctrl-C meets in a run
    try:
        with pytest.raises(KeyboardInterrupt) as interrupt:
            checkpoint.save_checkpoint(path, state)
    finally:
        signal.signal(signal.SIGINT, previous)
    assert "the write of" in str(interrupt.value.__notes__) and "was completed before this signal" in str(
        interrupt.value.__notes__
    )
    saved = checkpoint.load_checkpoint(path)
    assert saved["epoch"] == 3 and torch.equal(saved["after"], torch.zeros(1000))
    assert os.listdir(tmp_path) == ["model.interrupted.pt"]


@pytest.mark.slow
def test_check_resume_tool_stops_runs_with_sighup_and_ctrl_c_and_finds_them_bitwise_equal_after_resuming():
    # One reference run, then a run stopped by SIGHUP (a closed terminal) and one by Ctrl-C, each resumed. With
    # gradients accumulated over 3 steps, a stop can fall inside an accumulation; with float16 the loss scale grows
    # every 2 clean steps and halves on each overflow, so a resume that restarted it from init_scale would skip
    # other updates. Ctrl-C resumes from a mid-epoch checkpoint, where the scale is furthest from its initial value
    # (SIGKILL's resume from an epoch checkpoint is tested in test_cli).
    amp = "{'dtype': 'float16', 'grad_scaler': {'growth_interval': 2}}"
    result = run_script(
        CHECK_RESUME,
        TINY_CONFIG,
        *("++accum_grad_multiple_step", "3", "++torch_amp", amp),
        # 0.1 s per step: the signal must land while the run still trains, also on a loaded machine
        *("++step_sleep", "0.1", "--signals", "HUP,INT", "--points", "1"),
        timeout=300,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    rows = result.stdout.splitlines()[1:]
    assert [row.split()[0] for row in rows] == ["SIGHUP", "SIGINT"], result.stdout
    assert all(row.endswith(" 130      1  bitwise equal") for row in rows), result.stdout + result.stderr


# ---------------------------------------------------------------------------- special files
def _special_file(path: str, kind: str) -> None:
    if kind == "FIFO":
        os.mkfifo(path)
    elif kind == "directory":
        os.mkdir(path)
    else:
        import socket

        socket.socket(socket.AF_UNIX).bind(path)  # the socket file stays after the object is gone


@pytest.mark.parametrize(
    "name, kind, args",
    [
        ("train.log", "FIFO", ("++log", "{path}")),
        ("findings.jsonl", "socket", ()),
        ("metrics.jsonl", "FIFO", ()),
        ("model.lock", "FIFO", ()),
        ("model.001.pt", "FIFO", ()),
        ("lr.txt", "FIFO", ("++learning_rate_file", "'{path}'")),
        ("lr.txt", "directory", ("++learning_rate_file", "'{path}'")),
        ("pre.pt", "FIFO", ("++preload_from_files", "{{'init': {{'filename': '{path}', 'init_for_train': True}}}}")),
        ("data.hdf", "FIFO", ("++train", "{{'class': 'HDFDataset', 'files': ['{path}']}}")),
        ("more_config.py", "FIFO", ("{path}",)),
    ],
)
def test_a_special_file_wherever_a_run_opens_one_is_refused_by_name_without_waiting(tmp_path, name, kind, args):
    path = str(tmp_path / name)
    _special_file(path, kind)
    before = sorted(os.listdir(tmp_path))
    args = [arg.format(path=path) for arg in args]
    result = run_rnn(TINY_CONFIG, "++model", str(tmp_path / "model"), *args, timeout=60)  # a hang fails here
    assert result.returncode == 2, result.stderr
    assert path in result.stderr and ("is a directory" if kind == "directory" else f"is a {kind}") in result.stderr
    assert "Traceback" not in result.stderr and "ep 1" not in result.stdout
    assert sorted(os.listdir(tmp_path)) == before  # nothing was written


# ------------------------------------------------------------------------------- bad values, startup
@pytest.mark.parametrize(
    "option, value, message",
    [
        ("max_seq_length", "-5", "must be in [0, inf), but got -5"),
        ("min_seq_length", "{'data': -1}", "must be in [0, inf), but got -1 (a value -1 of {'data': -1})"),
        ("batch_size", "{'data': 0}", "must be in [1, inf), but got 0 (a value 0 of {'data': 0})"),
    ],
)
def test_values_of_number_dicts_outside_their_range_exit_2_before_anything_is_loaded(tmp_path, option, value, message):
    result = run_rnn(TINY_CONFIG, "++model", str(tmp_path / "model"), f"++{option}", value)
    assert result.returncode == 2 and message in result.stderr, result.stderr
    assert result.stdout == "" and os.listdir(tmp_path) == []


def test_a_length_limit_naming_an_unknown_key_is_refused_as_batch_size_is(tmp_path):
    result = run_rnn(TINY_CONFIG, "++model", str(tmp_path / "model"), "++max_seq_length", "{'data': 3, 'dta': 4}")
    assert result.returncode == 2, result.stderr
    assert "max_seq_length = {'data': 3, 'dta': 4} names 'dta', which is no key of dataset 'train' (classes, data)" in (
        result.stderr
    )
    assert "ep 1" not in result.stdout and not os.path.exists(tmp_path / "model.001.pt")


def test_processes_of_torchrun_without_torch_distributed_are_told_so_and_start_nothing(tmp_path):
    env = {**os.environ, "WORLD_SIZE": "2", "RANK": "1", "LOCAL_RANK": "1"}  # what torchrun gives its second process
    result = run_rnn(TINY_CONFIG, "++model", str(tmp_path / "model"), "++log", str(tmp_path / "log"), env=env)
    assert result.returncode == 2, result.stderr
    assert "This process is rank 1 of 2 that torchrun started (WORLD_SIZE=2), but the config does not set " in (
        result.stderr
    )
    assert "torch_distributed" in result.stderr and "Another run" not in result.stderr
    assert os.listdir(tmp_path) == []


# ------------------------------------------------------------------------ signals in every phase
def test_sigterm_during_evaluation_secures_the_trained_epoch_at_once_and_the_resumed_run_ends_bit_for_bit(tmp_path):
    config, holding, release = _config_holding_at(tmp_path, "eval_step_start")  # epoch 1's first evaluation step
    prefix = str(tmp_path / "model")
    run = start_rnn(config, "++model", prefix)
    try:
        _wait_for_file(holding, run)
        run.send_signal(signal.SIGTERM)
        with open(release, "wb") as f:  # the evaluation step goes on; the stop comes right after it
            f.write(b"x")
        _, stderr = run.communicate(timeout=60)
    finally:
        run.kill()
    assert run.returncode == 130, stderr
    assert "Training stopped on request (SIGTERM) during the evaluation after epoch 1's training" in stderr
    assert not os.path.exists(f"{prefix}.001.pt")  # no waiting for the evaluation to end: a SIGKILL now loses nothing
    saved = checkpoint.load_training_state(checkpoint.interrupted_path(prefix))
    assert (saved["epoch"], saved["next_step"], saved["global_step"]) == (1, 10, 10)  # every training step of epoch 1

    resumed = run_rnn(config, "++model", prefix, "++callbacks", "{}")  # no second hold
    assert resumed.returncode == 0, resumed.stderr
    assert "Continuing epoch 1 at step 10 of 10." in resumed.stdout and "Epoch 1 evaluation: dev:" in resumed.stdout
    reference = run_rnn(config, "++model", str(tmp_path / "reference"), "++callbacks", "{}")
    assert reference.returncode == 0, reference.stderr
    differ = checkpoint_differences(
        checkpoint.load_checkpoint(f"{prefix}.002.pt"), checkpoint.load_checkpoint(str(tmp_path / "reference.002.pt"))
    )
    assert differ == [], differ
