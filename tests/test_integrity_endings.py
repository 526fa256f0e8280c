"""Every run ends, and its log says why: SIGTERM ends a step that never ends, the stall watch writes to the log,
and threads a config leaves running do not keep the process alive.

Real rnn.py processes, real signals, real threads; the tests wait for files and log lines. A run stuck in a step
ends by the framework's own exit from another thread, the same in a run forked from the preloaded server; the
leftover-threads test is about how the interpreter itself ends, so it runs a fresh one.
"""

import os
import signal
import subprocess
import sys
import time

import psutil
import pytest

from conftest import ROOT, StartedRun, run_rnn, start_rnn, tiny_config_with

RNN = os.path.join(ROOT, "rnn.py")


def _hanging_config(tmp_path) -> tuple[str, str]:
    """The tiny config whose train dataset never returns its batch after epoch 2's second step; a file says when."""
    marker = str(tmp_path / "hanging")
    config = tiny_config_with(
        tmp_path,
        "\nimport threading as _threading\n"
        "from framework.datasets.synthetic import GaussianClustersDataset as _Gaussian\n"
        "_position = {}\n"
        "class HangingDataset(_Gaussian):\n"
        "    def get_batch(self, indices):\n"
        "        if _position.get('epoch') == 2 and _position.get('steps', 0) >= 2:\n"
        f"            open({marker!r}, 'w').close()\n"
        "            _threading.Event().wait()  # a data loader that never returns\n"
        "        return super().get_batch(indices)\n"
        "def _epoch_start(state):\n"
        "    _position.update(epoch=state.epoch, steps=0)\n"
        "def _step_end(state):\n"
        "    _position['steps'] = _position.get('steps', 0) + 1\n"
        "callbacks = {'epoch_start': _epoch_start, 'step_end': _step_end}\n"
        "train = {'class': HangingDataset, 'split': 'train', 'num_seqs': 200, 'dim': 4, 'num_classes': 3}\n",
    )
    return config, marker


def _start(tmp_path, config: str, *args: str) -> StartedRun:
    return start_rnn(config, "++model", str(tmp_path / "model"), "++log", str(tmp_path / "train.log"), *args)


def _start_fresh(tmp_path, config: str, *args: str) -> subprocess.Popen:
    return subprocess.Popen(
        # no report.html (a process at the run's end, which it waits for), as start_rnn's runs
        [sys.executable, RNN, config, "++model", str(tmp_path / "model"), "++log", str(tmp_path / "train.log")]
        + [*args, "++report_html", "False"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _wait_for(condition, process: StartedRun, timeout: float = 90) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert process.poll() is None, f"the run ended early: {process.communicate()}"
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.01)


def _log_has(tmp_path, text: str):
    path = tmp_path / "train.log"
    return lambda: path.exists() and text in path.read_text()


def _assert_ended_stuck(tmp_path, run: StartedRun, stderr: str, why: str, signum=signal.SIGTERM) -> str:
    assert run.returncode == 128 + signum, stderr
    log = (tmp_path / "train.log").read_text()
    ending = f"{signum.name}: {why}"
    assert ending in log and ending in stderr
    assert (
        f"Ending the run now (exit {128 + signum}) without a checkpoint of the unfinished step (epoch 2, global step 12)."
        in log
    )
    assert f"The newest checkpoint is {tmp_path / 'model.001.pt'}; running the same command again resumes" in log
    assert "Where every thread was:\nThread 'MainThread'" in log and "_threading.Event().wait()" in log
    assert not (tmp_path / "model.interrupted.pt").exists() and not (tmp_path / "model.002.pt").exists()
    return log


@pytest.mark.slow  # seconds of real runs: the full suite runs it, the fast subset does not
@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])  # SIGINT: a script's kill -INT, not only Ctrl-C
def test_one_signal_ends_a_run_stuck_in_data_loading_after_the_grace_period_with_the_stacks_in_the_log(
    tmp_path, signum
):
    config, marker = _hanging_config(tmp_path)
    run = _start(tmp_path, config, "++stop_grace_seconds", "1")
    try:
        _wait_for(lambda: os.path.exists(marker), run)
        run.send_signal(signum)
        _, stderr = run.communicate(timeout=60)
    finally:
        run.kill()
    name = "Ctrl-C" if signum == signal.SIGINT else signum.name
    why = f"no step ended within 1 s (stop_grace_seconds) after {name}."
    log = _assert_ended_stuck(tmp_path, run, stderr, why, signum)
    assert f"{name}: stopping after the current step and writing a checkpoint" in log


@pytest.mark.slow  # seconds of real runs: the full suite runs it, the fast subset does not
def test_a_second_sigterm_ends_a_stuck_run_at_once(tmp_path):
    config, marker = _hanging_config(tmp_path)
    run = _start(tmp_path, config, "++stop_grace_seconds", "600")
    try:
        _wait_for(lambda: os.path.exists(marker), run)
        run.send_signal(signal.SIGTERM)
        _wait_for(_log_has(tmp_path, "SIGTERM: stopping after the current step"), run)
        run.send_signal(signal.SIGTERM)
        _, stderr = run.communicate(timeout=60)
    finally:
        run.kill()
    _assert_ended_stuck(tmp_path, run, stderr, "SIGTERM arrived again, after SIGTERM.")


@pytest.mark.slow  # seconds of real runs: the full suite runs it, the fast subset does not
def test_the_stall_watch_writes_to_the_log_and_sigterm_during_a_long_stall_ends_at_once(tmp_path):
    config, marker = _hanging_config(tmp_path)
    run = _start(tmp_path, config, "++watch_stall", "1", "++stop_grace_seconds", "0.5")
    try:
        _wait_for(lambda: os.path.exists(marker), run)
        hang_began = len((tmp_path / "train.log").read_text())  # a slow startup may have had stall lines already
        stall = "watch_stall: no step ended for"
        _wait_for(lambda: stall in (tmp_path / "train.log").read_text()[hang_began:], run)
        assert "(watch_stall = 1). Where every thread is:\nThread 'MainThread'" in (tmp_path / "train.log").read_text()
        assert "_threading.Event().wait()" in (tmp_path / "train.log").read_text()[hang_began:]
        run.send_signal(signal.SIGTERM)  # the step has been stuck for more than the grace period: no waiting
        _, stderr = run.communicate(timeout=60)
    finally:
        run.kill()
    log = _assert_ended_stuck(tmp_path, run, stderr, "SIGTERM arrived while the current step had run for ")
    assert "stopping after the current step" not in log


def test_garbage_there_is_at_exit_is_still_finalized(tmp_path):
    # The process skips Python's collections over every object at teardown (framework.base.quick_exit: seconds with
    # torch imported), after collecting once: an object in a reference cycle that becomes garbage as the process
    # ends (here, in an atexit handler of the config's) still has its finalizer run, as a plain interpreter would.
    marker = tmp_path / "finalized"
    extra = (
        "\nimport atexit as _atexit\n"
        "class _InACycle:\n"
        "    def __init__(self):\n"
        "        self.me = self  # only a garbage collection frees it\n"
        "    def __del__(self):\n"
        f"        open({str(marker)!r}, 'w').close()\n"
        "_atexit.register(_InACycle)  # garbage made at exit, after the run\n"
    )
    result = run_rnn(tiny_config_with(tmp_path, extra), "++num_epochs", "1", "++model", str(tmp_path / "m"))
    assert result.returncode == 0, result.stderr
    assert marker.exists()


@pytest.mark.slow  # seconds of real runs: the full suite runs it, the fast subset does not
@pytest.mark.parametrize("step_fails", [False, True])
def test_threads_the_config_leaves_running_are_named_in_the_log_and_the_run_ends_with_its_status(tmp_path, step_fails):
    extra = (
        "\nimport threading as _threading\n"
        "_threading.Thread(target=_threading.Event().wait, name='metrics-uploader').start()  # never ends\n"
    )
    if step_fails:
        extra += "def train_step(**_kwargs):\n    raise RuntimeError('boom in the step')\n"
    run = _start_fresh(tmp_path, tiny_config_with(tmp_path, extra), "++num_epochs", "1", "++stop_grace_seconds", "1")
    try:
        _, stderr = run.communicate(timeout=90)
    finally:
        run.kill()
    assert run.returncode == (1 if step_fails else 0), stderr
    log = (tmp_path / "train.log").read_text()
    assert "The run is over, but 1 thread(s) it started still run: 'metrics-uploader'. Python would wait" in log
    assert "Thread 'metrics-uploader', most recent call last:" in log
    assert f"Ending the process with exit status {run.returncode}, as the run would have" in log
    assert ("boom in the step" in stderr) == step_fails


@pytest.mark.slow
def test_sigterm_to_torchrun_stops_both_ranks_and_rank_1_names_rank_0s_checkpoint(tmp_path):
    command = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node=2", "--standalone", RNN]
    args = [os.path.join(ROOT, "tests", "data", "tiny_config.py"), "++torch_distributed", "{}", "++batch_size", "8"]
    job = subprocess.Popen(
        [*command, *args, "++step_sleep", "0.5", "++model", str(tmp_path / "m"), "++log", str(tmp_path / "log")],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        started = 0
        for line in job.stdout:  # both ranks print it; DDP keeps them within a step: 3 lines, both train
            started += line.startswith("train_step sleeps")
            if started == 3:
                break
        workers = [p for p in psutil.Process(job.pid).children(recursive=True) if "rnn.py" in " ".join(p.cmdline())]
        assert len(workers) == 2
        job.send_signal(signal.SIGTERM)  # torchrun passes it on to every rank
        job.communicate(timeout=120)
    finally:
        job.kill()
    rank1 = (tmp_path / "log.rank1").read_text()
    assert f"Rank 0 writes the checkpoint {tmp_path / 'm.interrupted.pt'}." in rank1
    assert "set the 'model' option" not in rank1
    assert f"Wrote {tmp_path / 'm.interrupted.pt'}." in (tmp_path / "log").read_text()
    assert (tmp_path / "m.interrupted.pt").exists()
