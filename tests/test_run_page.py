"""report.html: written by every run (at each epoch's end and at its end, however it ends), saying how the run
ended; the report command trusts no input; several runs compared on one page.

Real rnn.py runs with ``++report_html True`` (the harness turns the page off for the other tests), real files,
real signals; the tests wait for files and log lines.
"""

import datetime
import json
import os
import re
import shutil
import signal
import subprocess
import time

import pytest

from conftest import FAILING_TRAIN_STEP, TINY_CONFIG, run_rnn, run_script, start_rnn, start_script, tiny_config_with
from framework.commands import RNN_SCRIPT
from framework.run_files import Downsampled

PAGE = ("++report_html", "True")


def _report(*args) -> subprocess.CompletedProcess:
    return run_script(RNN_SCRIPT, "report", *map(str, args))


def _findings(directory) -> list[dict]:
    with open(os.path.join(directory, "findings.jsonl"), encoding="utf-8") as f:
        return [json.loads(line) for line in f]


def _wait_for(condition, timeout: float = 90) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.02)


def test_a_failed_run_writes_its_page_with_the_failure_as_a_finding(tmp_path):
    config = tiny_config_with(tmp_path, FAILING_TRAIN_STEP)
    result = run_rnn(config, "++model", str(tmp_path / "model"), *PAGE)
    assert result.returncode == 1 and "boom in user code" in result.stderr
    (failure,) = _findings(tmp_path)
    assert (failure["severity"], failure["check"], failure["step"]) == ("error", "run failed", 0)
    assert failure["where"]["line"].startswith(f"{config}:") and failure["where"]["function"] == "train_step"
    assert "    run failed: 1 error; first at epoch 1, step 0: The run failed at epoch 1, global step 0 in line " in (
        result.stdout
    )
    page = (tmp_path / "report.html").read_text()  # there when the run has ended
    assert "Ended: failed: RuntimeError: boom in user code: found-me" in page
    assert "run failed" in page and "raise RuntimeError(&#x27;boom in user code: &#x27; + secret_local)" in page


@pytest.mark.slow  # two runs and their pages
def test_a_completed_run_writes_its_page_and_its_resumed_run_shows_on_it(tmp_path):
    args = [TINY_CONFIG, "++model", str(tmp_path / "model"), *PAGE]
    assert run_rnn(*args, "++num_epochs", "1").returncode == 0
    page = (tmp_path / "report.html").read_text()
    assert "Ended: completed</p>" in page and "resumed at" not in page
    assert re.search(r"<td>1</td><td>\d{4}-\d\d-\d\dT[\d:]+[+-]\d\d:\d\d to \d{4}-", page)  # when it ran
    assert f"++model {tmp_path / 'model'} ++report_html True ++num_epochs 1</code>" in page  # how to run it again
    assert re.search(r"<g><title>dev \(epoch\), ce: step 9: \d\.\d+</title>", page)  # the value on hover
    assert "<g><title>train (epoch), fer: step 9: " in page
    assert re.search(r"<g><title>train \(step\): step 0: \d\.\d+, step 1: \d\.\d+", page)  # per step, too
    assert re.search(r">chance level 1\.0\d+</text>", page)  # ln 3 for 3 balanced classes, from the loss check
    assert re.search(r">chance level 0\.6\d+</text>", page)  # fer: always the most frequent of 3 classes
    assert ">host: process RSS (MB)</text>" in page and ">best dev " in page
    assert run_rnn(*args, "++num_epochs", "2").returncode == 0
    page = (tmp_path / "report.html").read_text()
    assert "<td>2</td>" in page and "resumed at global step 10" in page and page.count("Ended: completed") == 1
    assert page.count(">resumed</text>") == 4  # marked on every picture: scores, learning rate, gradients, memory


@pytest.mark.slow  # a run drawn at each epoch end
def test_the_page_is_refreshed_at_each_epoch_end_and_written_after_ctrl_c(tmp_path):
    page = tmp_path / "report.html"
    run = start_rnn(
        TINY_CONFIG, "++model", str(tmp_path / "model"), "++num_epochs", "1000", "++step_sleep", "0.02", *PAGE
    )
    _wait_for(lambda: page.exists() or run.poll() is not None)
    assert run.poll() is None  # written while the run goes on: at an epoch's end
    assert "no end recorded: the run is still going" in page.read_text()
    run.send_signal(signal.SIGINT)
    _, stderr = run.communicate(timeout=90)
    assert run.returncode == 130, stderr
    _wait_for(lambda: "Ended: interrupted: Training stopped on request (Ctrl-C)" in page.read_text())
    assert not [name for name in os.listdir(tmp_path) if ".tmp" in name]  # written atomically


def _run_dir(tmp_path) -> str:
    """A model directory with a small healthy record of one run."""
    directory = tmp_path / "run"
    directory.mkdir()
    records = [
        {"kind": "run", "step": 0, "epoch": 0, "task": "train", "options": {"learning_rate": "0.1"}},
        {"kind": "steps", "step": [0, 1], "epoch": [1, 1], "lr": [0.1, 0.1], "losses": {"ce": [2.0, 1.5]}},
        {"kind": "memory", "step": 2, "rss_mb": 300.0, "device_mb": 20.5, "reserved_mb": 64.0},
        {"kind": "epoch", "step": 2, "epoch": 1, "lr": 0.1, "scores": {"train": {"ce": 1.7}, "dev": {"ce": 1.8}}},
    ]
    (directory / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    return str(directory)


@pytest.mark.slow  # twelve report commands
def test_report_reads_no_link_no_special_file_and_names_the_damaged_line(tmp_path):
    directory = _run_dir(tmp_path)
    metrics = os.path.join(directory, "metrics.jsonl")
    healthy = open(metrics, "rb").read()
    assert _report(directory).returncode == 0
    page = open(os.path.join(directory, "report.html"), encoding="utf-8").read()
    for memory in (
        "host: process RSS",
        "accelerator: allocated by tensors",
        "accelerator: reserved by the caching allocator",
    ):
        assert f">{memory} (MB)</text>" in page  # what each memory curve measures
    with open(metrics, "ab") as f:
        f.write(b'{"kind": "steps", "step": [2], "ep')  # the last line of a run killed while writing it: skipped
    assert _report(directory).returncode == 0

    def refused(content: bytes | None, expected: str, make=None) -> None:
        os.remove(metrics) if os.path.lexists(metrics) and not os.path.isdir(metrics) else None
        if make is not None:
            make()
        else:
            with open(metrics, "wb") as f:
                f.write(healthy + content)
        result = _report(directory)
        assert result.returncode == 2, result
        assert expected in result.stderr and "Traceback" not in result.stderr, result.stderr
        assert len(result.stderr.strip().splitlines()) == 1, result.stderr

    refused(b"42\n", f"{metrics}, line 5: a JSON int, not a record")
    refused(b'{"kind": "epoch", "epoch": 2, "scores": {}}\n', f"{metrics}, line 5: the record has no field 'step'")
    refused(b'{"kind": "memory", "step": 1, "rss_mb": "a lot"}\n', f"{metrics}, line 5: field 'rss_mb' is str")
    refused(b'{"kind": "run", "step": 0}\n\xff\xfe\n', f"{metrics}, line 6: not UTF-8 text")
    refused(b"{not json\n" + healthy, f"{metrics}, line 5: not a JSON record")
    target = tmp_path / "elsewhere.jsonl"
    target.write_bytes(healthy)
    refused(None, f"{metrics} is a symbolic link", lambda: os.symlink(target, metrics))
    os.remove(metrics)
    refused(None, f"{metrics} is a FIFO", lambda: os.mkfifo(metrics))  # refused at once: run_script's timeout
    os.remove(metrics)
    refused(None, f"{metrics} is a directory", lambda: os.mkdir(metrics))
    os.rmdir(metrics)
    findings = os.path.join(directory, "findings.jsonl")
    with open(findings, "w") as f:
        f.write('{"severity": "fatal", "check": "x", "message": "m"}\n')
    refused(None, f"{findings}, line 1: severity 'fatal' is none of note, warning, error", lambda: None)
    os.remove(findings)
    attention = os.path.join(directory, "attention.npz")
    with open(attention, "wb") as f:
        f.write(b"PK\x03\x04 not a zip archive")
    refused(healthy[:0], f"{attention} is not an archive of attention weights (BadZipFile: ")


def test_report_reads_a_huge_metrics_file_in_bounded_memory_and_stops_cleanly_on_ctrl_c(tmp_path):
    series = Downsampled(points=100)
    for step in range(1_000_000):
        series.add(step, 1.0 / (1 + step))
    assert 100 <= len(series.bins) <= 200 and series.width == 8192
    assert series.xs()[0] == (8192 - 1) / 2 and series.ranges()[1][0] == 1.0  # the first bin's maximum is kept
    directory = _run_dir(tmp_path)
    with open(os.path.join(directory, "metrics.jsonl"), "a") as f:
        line = json.dumps({"kind": "steps", "step": list(range(100)), "epoch": [1] * 100, "lr": [0.1] * 100,
                           "losses": {"ce": [1.0] * 100}})  # fmt: skip
        f.write((line + "\n") * 20_000)  # 2 million steps, 14 MB: seconds to read, so Ctrl-C comes while it reads
    started = start_script(RNN_SCRIPT, "report", directory)
    fds = f"/proc/{started.pid}/fd"
    _wait_for(lambda: any(link.endswith("metrics.jsonl") for link in _links(fds)))
    started.send_signal(signal.SIGINT)  # while it reads the file
    _, stderr = started.communicate(timeout=60)
    assert started.returncode == 130 and stderr.strip() == "report: interrupted (Ctrl-C); no page was written."


def _fds(directory: str) -> list[str]:
    try:
        return os.listdir(directory)
    except FileNotFoundError:
        return []


def _links(directory: str) -> list[str]:
    """What the open file descriptors listed in ``directory`` (/proc/PID/fd) point to; one closed between the
    listing and the read is left out."""
    links = []
    for fd in _fds(directory):
        try:
            links.append(os.readlink(os.path.join(directory, fd)))
        except FileNotFoundError:
            pass
    return links


@pytest.mark.slow  # two runs and three pages: seconds
def test_report_compares_runs_on_one_page(tmp_path):
    for name, lr in (("lr_high", "0.05"), ("lr_zero", "0.0")):
        result = run_rnn(
            TINY_CONFIG, "++model", str(tmp_path / name / "model"), "++learning_rate", lr, "++num_epochs", "1"
        )
        assert result.returncode == 0, result.stderr
    output = tmp_path / "compare.html"
    result = _report(tmp_path / "lr_high", tmp_path / "lr_zero", "--output", output)
    assert result.returncode == 0 and f"Wrote {output}" in result.stdout, result.stderr
    page = output.read_text()
    assert "<h1>Runs compared: lr_high, lr_zero</h1>" in page
    assert "<td>learning_rate</td><td><code>0.05</code></td><td><code>0.0</code></td>" in page  # side by side
    assert "<td>num_epochs</td>" not in page  # the same in both
    assert "<h2>Run 1: lr_high</h2>" in page and "<h2>Run 2: lr_zero</h2>" in page
    assert "the learning rate is 0" in page.split("<h2>Run 2: lr_zero</h2>")[1]  # each run's findings
    assert "lr_high: train (step)" in page and "lr_zero: train (step)" in page  # both on the curves
    # by wall time: epochs that ended within the first second are not drawn on an invented time axis; 30 s are
    # (both runs at 0 s before the first page: a real run on a busy machine can take more than two seconds)
    for names, seconds in ((("lr_high", "lr_zero"), 0), (("lr_high",), 30)):
        for name in names:
            _set_epoch_times(tmp_path / name / "metrics.jsonl", seconds)
        assert _report(tmp_path / "lr_high", tmp_path / "lr_zero", "--output", output).returncode == 0
        page = output.read_text()
        drawn = "<h2>Scores by wall time</h2>\n<svg" in page and ">seconds since the run first started" in page
        assert drawn == (seconds == 30) and ("too coarse to place their epochs in time" in page) == (seconds == 0)


def _set_epoch_times(path, seconds: int) -> None:
    """Rewrite the epoch records' times to ``seconds`` after the run's first start."""
    records = [json.loads(line) for line in path.read_text().splitlines()]
    start = datetime.datetime.fromisoformat(next(r for r in records if r["kind"] == "run")["time"])
    for record in records:
        if record["kind"] == "epoch":
            record["time"] = (start + datetime.timedelta(seconds=seconds)).isoformat()
    path.write_text("".join(json.dumps(r) + "\n" for r in records))


@pytest.mark.slow  # browser starts and real runs: seconds
@pytest.mark.skipif(shutil.which("chromium") is None, reason="needs Debian's chromium (.ci/run installs it)")
def test_failed_and_compared_pages_render_in_headless_chromium(tmp_path):
    failing = tiny_config_with(tmp_path, FAILING_TRAIN_STEP)
    assert run_rnn(failing, "++model", str(tmp_path / "failed" / "model"), *PAGE).returncode == 1
    assert run_rnn(TINY_CONFIG, "++model", str(tmp_path / "healthy" / "model"), "++num_epochs", "1").returncode == 0
    assert _report(tmp_path / "failed", tmp_path / "healthy", "--output", tmp_path / "compare.html").returncode == 0
    browser = ["chromium", "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", "--no-first-run"]
    for page, expected in (
        (tmp_path / "failed" / "report.html", ["Ended: failed: RuntimeError: boom in user code", "run failed"]),
        (tmp_path / "compare.html", ["Run 1: failed", "Run 2: healthy", "failed: RuntimeError", "completed"]),
    ):
        dom = subprocess.run([*browser, "--dump-dom", page.as_uri()], capture_output=True, text=True, timeout=120)
        for text in expected:
            assert text in dom.stdout, (text, dom.stderr)
