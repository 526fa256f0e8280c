"""What a run leaves behind about itself: findings.jsonl, the summary block at the end of train.log, the exit status of
findings_fail_level, and report.html.

Real rnn.py runs (a learning rate of 0 is a warning every run reports at startup), real files, real signals; the
tests wait for files and log lines.
"""

import json
import os
import re
import shutil
import signal
import subprocess
import time

import numpy
import pytest

from conftest import FAILING_TRAIN_STEP, ROOT, TINY_CONFIG, StartedRun, run_rnn, run_script, start_rnn, tiny_config_with
from framework.base.log import TIME_PREFIX
from framework.commands import RNN_SCRIPT

ZERO_LR = ("++learning_rate", "0.0")


def _findings(directory) -> list[dict]:
    with open(os.path.join(directory, "findings.jsonl"), encoding="utf-8") as f:
        return [json.loads(line) for line in f]


def _summary(stdout: str) -> str:
    """The summary block: from its first line to the end of the output."""
    assert stdout.count("Run summary: ") == 1, stdout
    return stdout[stdout.index("Run summary: ") :]


def test_findings_file_summary_and_timestamped_log_of_a_run_and_its_resumed_run(tmp_path):
    args = [TINY_CONFIG, "++model", str(tmp_path / "model"), "++log", str(tmp_path / "train.log"), "++num_epochs", "1"]
    first = run_rnn(*args, *ZERO_LR)
    assert first.returncode == 0, first.stderr
    (found,) = [f for f in _findings(tmp_path) if f["check"] == "unusual option values"]
    assert found["severity"] == "warning" and found["check"] == "unusual option values"
    assert found["message"].startswith("the learning rate is 0") and (found["epoch"], found["step"]) == (0, 0)
    # The summary comes after the last checkpoint line and ends the output.
    summary = _summary(first.stdout)
    assert first.stdout.rindex("Saved checkpoint") < first.stdout.index("Run summary: completed\n")
    assert "  task train: epoch 1 of 1, global step 10, " in summary
    assert re.search(r"^  best dev: ce \d\.\d+ \(epoch 1\), fer \d\.\d+ \(epoch 1\)$", summary, re.MULTILINE)
    assert "    unusual option values: 1 warning; first at epoch 0, step 0: the learning rate is 0: " in summary
    assert f"  findings file: {tmp_path / 'findings.jsonl'}" in summary
    assert f"  checkpoints: {tmp_path / 'model.001.pt'} (1 epoch checkpoint(s))" in summary
    # train.log: every message carries the wall-clock time; without it, the log is what stdout showed.
    log = (tmp_path / "train.log").read_text()
    assert re.match(TIME_PREFIX, log) and log.count("\n20") >= first.stdout.count("\nEpoch ")
    assert re.sub(TIME_PREFIX, "", log, flags=re.MULTILINE) == first.stdout

    resumed = run_rnn(*args[:-1], "2", *ZERO_LR)
    assert resumed.returncode == 0, resumed.stderr
    earlier, again = [f for f in _findings(tmp_path) if f["check"] == "unusual option values"]  # the file continues
    assert earlier == found and (again["epoch"], again["step"]) == (1, 10)
    assert "  task train: epoch 2 of 2, global step 20, " in _summary(resumed.stdout)


def test_findings_fail_level_exits_3_after_the_run_did_its_work(tmp_path):
    args = [TINY_CONFIG, "++model", str(tmp_path / "model"), "++num_epochs", "1", *ZERO_LR]
    failing = run_rnn(*args, "++findings_fail_level", "'warning'")
    assert failing.returncode == 3, failing.stderr
    assert (tmp_path / "model.001.pt").exists()  # the checkpoint is written before
    assert "  findings_fail_level = 'warning': 2 finding(s) at that severity or above, so the exit status is 3" in (
        _summary(failing.stdout)
    )
    passing = run_rnn(*args[:-3], "2", *ZERO_LR, "++findings_fail_level", "'error'")  # a warning is below 'error'
    assert passing.returncode == 0, passing.stderr
    healthy = run_rnn(TINY_CONFIG, "++model", str(tmp_path / "healthy" / "model"), "++findings_fail_level", "'warning'")
    assert healthy.returncode == 0 and _findings(tmp_path / "healthy") == []  # an empty file: nothing found


def _start(tmp_path, *args: str) -> StartedRun:
    return start_rnn(
        TINY_CONFIG,
        "++model",
        str(tmp_path / "model"),
        "++log",
        str(tmp_path / "train.log"),
        *("++num_epochs", "1000", "++step_sleep", "0.02", *args),
    )


def _wait_for(condition, process: StartedRun, timeout: float = 90) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert process.poll() is None, f"the run ended early: {process.communicate()}"
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.01)


def test_a_killed_run_keeps_its_findings_and_a_ctrl_c_run_ends_with_its_summary(tmp_path):
    killed = _start(tmp_path / "killed", *ZERO_LR)
    path = tmp_path / "killed" / "findings.jsonl"
    _wait_for(lambda: path.exists() and path.read_text().endswith("\n"), killed)
    killed.kill()  # SIGKILL: nothing of the run runs after it
    killed.communicate()
    assert _findings(tmp_path / "killed")[0]["check"] == "unusual option values"

    stopped = _start(tmp_path, *ZERO_LR)
    log = tmp_path / "train.log"
    _wait_for(lambda: log.exists() and "Epoch 1 train" in log.read_text(), stopped)
    stopped.send_signal(signal.SIGINT)
    stdout, stderr = stopped.communicate(timeout=90)
    assert stopped.returncode == 130, stderr
    summary = _summary(stdout)
    # the signal lands in epoch 1's evaluation (which it ends) or in epoch 2's training
    assert summary.startswith("Run summary: interrupted: Training stopped on request (Ctrl-C) ")
    assert "Saved checkpoint" not in stdout[stdout.index("Run summary") :]
    assert f"{tmp_path / 'model.interrupted.pt'}" in summary and "unusual option values: 1 warning" in summary


def test_the_summary_of_a_failed_run_names_the_error(tmp_path):
    result = run_rnn(tiny_config_with(tmp_path, FAILING_TRAIN_STEP), "++model", str(tmp_path / "model"))
    assert result.returncode == 1 and "boom in user code" in result.stderr
    summary = _summary(result.stdout)
    assert summary.startswith("Run summary: failed: RuntimeError: boom in user code: found-me\n")
    assert "  task train: epoch 1 of 2, global step 0, " in summary and "  checkpoints: none" in summary


def test_a_findings_file_that_is_a_planted_link_is_refused(tmp_path):
    target = tmp_path / "precious"
    target.write_text("keep\n")
    os.symlink(target, tmp_path / "findings.jsonl")
    result = run_rnn(TINY_CONFIG, "++model", str(tmp_path / "model"), *ZERO_LR)
    assert result.returncode == 2 and "findings.jsonl (the findings file) is a symbolic link" in result.stderr
    assert target.read_text() == "keep\n"


def _report(directory) -> subprocess.CompletedProcess:
    return run_script(RNN_SCRIPT, "report", str(directory))


def test_report_draws_the_run_with_its_findings_on_one_self_contained_page(tmp_path):
    args = [TINY_CONFIG, "++model", str(tmp_path / "model"), "++debug_grad_health", "5", *ZERO_LR]
    assert run_rnn(*args).returncode == 0
    result = _report(tmp_path)
    assert result.returncode == 0, result.stderr
    page = (tmp_path / "report.html").read_text()
    assert f"Wrote {tmp_path / 'report.html'}" in result.stdout
    for section in (
        "Scores of train and dev",
        "Applied learning rate",
        "Gradient norms per layer group (module path)",
        "Memory",
    ):
        assert f"<h2>{section}</h2>\n<svg" in page  # a picture in each, inline
    assert "unusual option values" in page and "the learning rate is 0" in page
    assert "<td>learning_rate</td><td><code>0.0</code></td>" in page  # options that differ from the defaults
    assert "<script" not in page and not re.search(r"(src|href)=['\"]?(https?:|//)", page)  # nothing to fetch

    nothing = _report(tmp_path / "empty")
    assert nothing.returncode == 2 and "holds no metrics.jsonl and no findings.jsonl" in nothing.stderr


@pytest.mark.slow  # an attention model's run and its page
def test_report_attention_keeps_the_weights_of_the_first_dev_batch_for_heatmaps(tmp_path):
    config = os.path.join(ROOT, "tests", "zoo", "lib_transformer.py")  # nn.TransformerEncoder, the tutorial's way
    result = run_rnn(config, "++model", str(tmp_path / "model"), "++report_attention", "True")
    assert result.returncode == 0, result.stderr
    # The file, not the log line: the line was missing from stdout in 1 of ~6 full-suite runs (cause not found yet)
    assert (tmp_path / "attention.npz").is_file(), result.stdout
    assert _report(tmp_path).returncode == 0
    page = (tmp_path / "report.html").read_text()
    assert "<h3>encoder.layers.0.self_attn</h3><svg" in page and "<h3>encoder.layers.1.self_attn</h3><svg" in page
    # the axes are the first dev sequence's input tokens (12AX's symbols), not positions
    tokens = numpy.load(tmp_path / "attention.npz")["__tokens__"]
    assert len(tokens) >= 10 and set(tokens) <= set("123ABCXYZ")
    assert "key token" in page and "query token" in page


@pytest.mark.slow  # a browser start and a real run: seconds
@pytest.mark.skipif(shutil.which("chromium") is None, reason="needs Debian's chromium (.ci/run installs it)")
def test_report_renders_in_headless_chromium_with_its_findings(tmp_path):
    from PIL import Image

    args = [TINY_CONFIG, "++model", str(tmp_path / "model"), "++debug_grad_health", "5", *ZERO_LR]
    assert run_rnn(*args).returncode == 0
    assert _report(tmp_path).returncode == 0
    url = (tmp_path / "report.html").as_uri()
    browser = ["chromium", "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", "--no-first-run"]
    shot = tmp_path / "report.png"
    run = subprocess.run(
        [*browser, f"--screenshot={shot}", "--window-size=1200,2400", url], capture_output=True, text=True, timeout=120
    )
    assert shot.exists(), run.stderr
    image = Image.open(shot).convert("RGB")
    colors = image.getcolors(maxcolors=1 << 20)
    assert len(colors) > 50  # curves, text and markers, not a blank page
    dom = subprocess.run([*browser, "--dump-dom", url], capture_output=True, text=True, timeout=120).stdout
    assert "unusual option values" in dom and "the learning rate is 0" in dom
    if os.environ.get("FRAMEWORK_KEEP_SCREENSHOT"):
        shutil.copy(shot, os.environ["FRAMEWORK_KEEP_SCREENSHOT"])
