"""The test harness itself (tools/devkit/preloaded.py): a forked run that does not end is reported and ended."""

import shutil

import psutil
import pytest
from devkit.preloaded import RunTimedOut

from conftest import run_script

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
