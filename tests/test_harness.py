"""The test harness itself (tools/devkit/preloaded.py): a forked run that does not end is reported and ended; a forked
run starts from a fresh interpreter's state and prints what a fresh run prints."""

import json
import os
import re
import shutil

import psutil
import pytest
from devkit.preloaded import RunTimedOut

from conftest import ROOT, run_rnn, run_script, tiny_config_with

HANGS = """\
import time


def wait_for_ever():
    print("waiting", flush=True)
    time.sleep(3600)


wait_for_ever()
"""


def test_a_run_that_times_out_says_where_its_processes_stood_and_is_gone(tmp_path):
    script = tmp_path / "hangs.py"
    script.write_text(HANGS)
    with pytest.raises(RunTimedOut) as timed_out:
        run_script(str(script), timeout=2)
    message = str(timed_out.value)
    assert "timed out after 2 seconds" in message and "--- the end of its stdout:\nwaiting" in message
    pid = int(message.split("--- its processes as it timed out:\nprocess ")[1].split()[0])
    if shutil.which("gdb"):  # the hung frame, and none of the harness's frames that forked it
        assert f"{script}:6 in wait_for_ever" in message and "preloaded.py" not in message, message
    else:
        assert "(no gdb: no stacks)" in message
    assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE


# Printed by the config as the run reads it: what a forked run would inherit from the server where a fresh
# interpreter starts otherwise (devkit/preloaded.py's _as_a_fresh_interpreter), and two draws of the global RNGs.
INHERITED_STATE = """
import json as _json, multiprocessing as _mp, os as _os, sys as _sys
import numpy as _np, torch as _torch
_state = {
    "sys.path": _sys.path,
    "descriptors": sorted(_os.listdir("/proc/self/fd"), key=int),
    "torch threads": _torch.get_num_threads(),
    "process": [_mp.current_process().name, _mp.parent_process() is None],
}
print("STATE " + _json.dumps(_state), flush=True)
print("DRAWS " + _json.dumps([_np.random.rand(), _torch.rand(1).item()]), flush=True)
"""
# A tool that trains in a child process, as tools/check-resume.py does: forked from the tool's own forked process.
TOOL = """\
import subprocess, sys
run = subprocess.run([sys.executable, *sys.argv[1:]], capture_output=True, text=True, stdin=subprocess.DEVNULL)
print(run.stdout, end="")
sys.exit(run.returncode)
"""


@pytest.mark.slow  # a fresh interpreter: seconds of imports
def test_a_forked_run_prints_the_training_lines_and_starts_from_the_state_of_a_fresh_one(tmp_path, monkeypatch):
    config = tiny_config_with(tmp_path, INHERITED_STATE)
    args = (config, "++model", "None", "++log", "None", "++tensorboard_dir", "None")
    env = {**os.environ, "OMP_NUM_THREADS": "2"}  # the server's is 1 (conftest.py): a run's own is what counts
    forked = run_rnn(*args, env=env, cwd=str(tmp_path))
    tool = tmp_path / "train_in_a_child.py"
    tool.write_text(TOOL)
    by_a_tool = run_script(str(tool), os.path.join(ROOT, "rnn.py"), *args, "++report_html", "False", env=env)
    monkeypatch.setenv("FRAMEWORK_TEST_FRESH_PROCESSES", "1")
    fresh = run_rnn(*args, env=env, cwd=str(tmp_path))
    runs = {"forked": forked, "forked by a forked tool": by_a_tool, "fresh": fresh}
    for name, run in runs.items():
        assert run.returncode == 0, (name, run.stdout + run.stderr)

    def printed(run, prefix: str) -> list:
        return [json.loads(line[len(prefix) :]) for line in run.stdout.splitlines() if line.startswith(prefix)]

    def training_lines(run) -> list[str]:  # without the seconds an epoch took
        lines = [line for line in run.stdout.splitlines() if re.match(r"Epoch \d+ (train|evaluation):", line)]
        return [re.sub(r", [\d.]+ sec,", ",", line) for line in lines]

    assert len(training_lines(fresh)) == 4, fresh.stdout
    for name, run in runs.items():
        assert training_lines(run) == training_lines(fresh), name
        assert printed(run, "STATE ") == printed(fresh, "STATE "), name
    assert printed(fresh, "STATE ")[0]["torch threads"] == 2
    draws = [tuple(printed(run, "DRAWS ")[0]) for run in runs.values()]
    assert all(len({draw[i] for draw in draws}) == len(draws) for i in range(2)), draws  # numpy's, torch's
