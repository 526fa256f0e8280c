"""Record files (findings.jsonl, metrics.jsonl) stay valid JSON lines whatever happened to the run before:
a line a dead run cut short is set aside, a write that fails is undone and named.

Real files throughout; the failing write is a real one, cut short by the file size limit (RLIMIT_FSIZE) in a
child process; the resumed run is a real rnn.py run.
"""

import json
import os
import subprocess
import sys

import pytest

from conftest import ROOT, TINY_CONFIG, captured_log, run_rnn
from framework.base.record_file import RecordFile

CUT_SHORT = b'{"kind": "steps", "step": [1, 2'  # what a run killed in the middle of a write leaves


def _records(path) -> list[dict]:
    """Every line of ``path`` parsed as JSON, as a reader of the file does (fails on a broken line)."""
    with open(path, "rb") as f:
        data = f.read()
    assert data.endswith(b"\n"), data[-80:]
    return [json.loads(line) for line in data.splitlines()]


def test_a_line_cut_short_is_set_aside_once_and_the_records_go_on_after_the_last_complete_one(tmp_path):
    path = tmp_path / "metrics.jsonl"
    path.write_bytes(b'{"kind": "run"}\n' + CUT_SHORT)
    with captured_log(2) as lines:
        file = RecordFile(str(path), "the metrics file", "")
        file.open()
        file.append(['{"kind": "epoch"}'])
        file.append(['{"kind": "memory"}'])
        file.close()
    assert _records(path) == [{"kind": "run"}, {"kind": "epoch"}, {"kind": "memory"}]
    assert (tmp_path / "metrics.jsonl.partial").read_bytes() == CUT_SHORT + b"\n"
    said = [line for line in lines if "cut short" in line]
    assert len(said) == 1 and f"{path} ended in a line cut short ({len(CUT_SHORT)} bytes" in said[0]
    assert "moved to" in said[0] and "metrics.jsonl.partial" in said[0]

    path.write_bytes(CUT_SHORT)  # nothing complete at all: the file starts afresh
    with captured_log(2):
        file = RecordFile(str(path), "the metrics file", "")
        file.open()
        file.append(['{"kind": "run"}'])
        file.close()
    assert _records(path) == [{"kind": "run"}]
    assert (tmp_path / "metrics.jsonl.partial").read_bytes() == (CUT_SHORT + b"\n") * 2


# A child process whose file size limit cuts a write of records short: a real short write, then a real EFBIG.
_LIMITED_WRITER = """
import os, resource, signal, sys
from framework.base.errors import WriteError
from framework.base.record_file import RecordFile
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # the write returns EFBIG instead of the signal killing the process
path = sys.argv[1]
file = RecordFile(path, "the metrics file", "ADVICE.")
file.open()
file.append(['{"kind": "run"}'])
resource.setrlimit(resource.RLIMIT_FSIZE, (os.path.getsize(path) + 100, resource.RLIM_INFINITY))
try:
    file.append(['{"kind": "steps", "values": "%s"}' % ("x" * 500)])
except WriteError as exc:
    print(exc)
file.append(['{"kind": "after"}'])  # the file takes no more records once a write failed
"""


def test_a_write_cut_short_by_a_limit_is_undone_and_reported_naming_the_file(tmp_path):
    path = tmp_path / "metrics.jsonl"
    result = subprocess.run(
        [sys.executable, "-c", _LIMITED_WRITER, str(path)],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith(f"Writing the metrics file {path} failed: File too large; ")
    assert "the records written before are intact. ADVICE." in result.stdout
    assert _records(path) == [{"kind": "run"}]  # the 100 bytes that fitted were cut off again


def test_a_resumed_run_after_a_run_died_mid_write_keeps_both_record_files_valid(tmp_path):
    prefix = str(tmp_path / "model")
    unusual = ("++learning_rate", "0.0")  # a finding ('unusual option values') in each run's findings file
    first = run_rnn(TINY_CONFIG, "++model", prefix, "++num_epochs", "1", *unusual)
    assert first.returncode == 0, first.stderr
    for name in ("findings.jsonl", "metrics.jsonl"):
        with open(tmp_path / name, "ab") as f:
            f.write(CUT_SHORT)
    resumed = run_rnn(TINY_CONFIG, "++model", prefix, "++num_epochs", "2", *unusual)
    assert resumed.returncode == 0, resumed.stderr
    for name in ("findings.jsonl", "metrics.jsonl"):
        assert (tmp_path / f"{name}.partial").read_bytes() == CUT_SHORT + b"\n"
        assert resumed.stdout.count(f"{tmp_path / name} ended in a line cut short") == 1
    assert [r["kind"] for r in _records(tmp_path / "metrics.jsonl")].count("run") == 2
    assert [r["check"] for r in _records(tmp_path / "findings.jsonl")].count("unusual option values") == 2


@pytest.mark.parametrize("kind", ["FIFO", "socket"])
def test_a_special_file_in_place_of_a_record_file_is_refused_without_waiting(tmp_path, kind):
    path = str(tmp_path / "findings.jsonl")
    if kind == "FIFO":
        os.mkfifo(path)
    else:
        import socket

        server = socket.socket(socket.AF_UNIX)
        server.bind(path)
    file = RecordFile(path, "the findings file", "")
    with pytest.raises(Exception, match=f"the findings file\\) is a {kind}"):
        file.open()
    assert not file.is_open
