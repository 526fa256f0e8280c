"""Post-mortem debuggers on a real pseudo-terminal: the exception's note says how many ``up`` steps reach the
user's line, and that many steps get there, under ``python -m pdb -c continue`` and ``ipython --pdb``.

The debuggers' own entry points (pdb's ``main``, the ``ipython`` launcher) run as scripts forked from the preloaded
server (tools/devkit): what they do with rnn.py (run it as ``__main__``, post mortem on its exception) is theirs."""

import os
import pdb
import re
import sys

import pexpect
import pytest
from devkit.terminal import spawn_script  # pexpect: only the terminal tests need it

from conftest import FAILING_TRAIN_STEP, ROOT, run_script, tiny_config_with

pytestmark = pytest.mark.slow  # real runs under a debugger

RNN = os.path.join(ROOT, "rnn.py")
IPYTHON = os.path.join(os.path.dirname(sys.executable), "ipython")  # the launcher script of ``ipython``
ENV = dict(os.environ, IPY_TEST_SIMPLE_PROMPT="1", PYTHONUNBUFFERED="1", TERM="dumb")
# The tiny config's batches have 4 features: torch raises in Linear.forward, below the user's frame.
SHAPE_BUG = """
class Head(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(5, 3)

    def forward(self, x):
        secret_local = "found-me"
        return self.proj(x)  # the user's line


def get_model(**_kwargs):
    return Head()
"""
HINT = re.compile(r"up (\d+) reaches your code, \S*config\.py:(\d+) in forward")


def _up_to_the_users_line(child: pexpect.spawn, prompt: str) -> None:
    """Read the note's count, then go up that many frames from where torch raised: the user's line is there."""
    child.expect(HINT)
    steps, line = child.match.group(1), child.match.group(2)
    child.expect(prompt)
    assert "linear.py" in child.before  # the debugger opened where torch raised
    child.sendline(f"up {steps}")
    child.expect(prompt)
    assert re.search(rf"config\.py\({line}\)forward\(\)", child.before), child.before
    child.sendline("p secret_local")
    child.expect("'found-me'")
    child.expect(prompt)


def test_pdb_note_counts_the_up_steps_to_the_users_line(tmp_path):
    config = tiny_config_with(tmp_path, SHAPE_BUG)
    child = spawn_script(pdb.__file__, "-c", "continue", RNN, config, env=ENV, encoding="utf-8", timeout=60)
    _up_to_the_users_line(child, r"\(Pdb\) ")
    child.terminate(force=True)  # after quit, pdb would restart the script


def test_ipython_pdb_shows_the_short_traceback_and_the_same_count(tmp_path):
    config = tiny_config_with(tmp_path, SHAPE_BUG)
    child = spawn_script(IPYTHON, "--pdb", "--colors=nocolor", RNN, config, env=ENV, encoding="utf-8", timeout=60)
    child.expect(re.escape("Traceback (most recent call last; library frames folded):"))
    child.expect("RuntimeError: mat1 and mat2 shapes cannot be multiplied")
    _up_to_the_users_line(child, "ipdb> ")
    child.sendline("q")
    child.expect(pexpect.EOF)
    child.close()


def test_pdb_opens_in_the_users_frame_when_the_user_raised(tmp_path):
    config = tiny_config_with(tmp_path, FAILING_TRAIN_STEP)
    debugged = run_script(pdb.__file__, "-c", "continue", RNN, config, input="p secret_local\nquit\n", timeout=120)
    assert "'found-me'" in debugged.stdout, debugged.stdout[-2000:]
    assert "reaches your code" not in debugged.stdout  # no up steps to count
