"""Every script in tools/ has the same command-line shape, a fast ``--help`` and a clear usage error."""

import os
import subprocess
import sys

import pytest

from conftest import ROOT, TINY_CONFIG, run_rnn, run_script

TOOLS = sorted(name for name in os.listdir(os.path.join(ROOT, "tools")) if name.endswith(".py"))
# Run a tool as a script, then report on stderr whether it imported torch on the way.
RUN_AND_REPORT_TORCH = """
import runpy, sys
sys.argv = sys.argv[1:]
try:
    runpy.run_path(sys.argv[0], run_name="__main__")
    code = 0
except SystemExit as exc:
    code = exc.code
print("torch imported" if "torch" in sys.modules else "torch not imported", file=sys.stderr)
sys.exit(code)
"""
TAKE_A_CONFIG = [
    "check-determinism.py",
    "check-resume.py",
    "compare-models.py",
    "dump-dataset.py",
    "dump-forward-stats.py",
    "import-torch-model.py",
    "replay-step.py",
]


def _tool(name, *args):
    return subprocess.run(
        [sys.executable, "-c", RUN_AND_REPORT_TORCH, os.path.join(ROOT, "tools", name), *args],
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )


def test_tools_dir_holds_only_tools():
    helpers = [name for name in TOOLS if not open(os.path.join(ROOT, "tools", name)).readline().startswith("#!")]
    assert not helpers, f"{helpers} are not runnable tools; helpers belong in framework/"


@pytest.mark.parametrize("name", TOOLS)
def test_help_exits_0_with_the_shared_usage_line_and_without_importing_torch(name):
    result = _tool(name, "--help")
    assert result.returncode == 0, result.stderr
    usage = result.stdout.splitlines()[0]
    expected = f"usage: python tools/{name} " + (
        "config.py [more.py ...] [++key value ...]" if name in TAKE_A_CONFIG else ""
    )
    assert usage.startswith(expected), usage
    assert "options:" in result.stdout and "--help" in result.stdout
    assert result.stderr.strip() == "torch not imported"


@pytest.mark.parametrize("name", TAKE_A_CONFIG + ["inspect-checkpoint.py"])
def test_missing_arguments_give_the_usage_and_one_line_reason(name):
    result = _tool(name)
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    reason, torch_line = lines[-2:]
    assert lines[0].startswith(f"usage: python tools/{name}")
    assert reason.startswith(f"python tools/{name}: error: ") and "required" in reason
    assert torch_line == "torch not imported"


def test_an_unknown_option_is_not_taken_for_a_config_file():
    result = _tool("dump-dataset.py", TINY_CONFIG, "--batchez", "2")
    assert result.returncode == 2
    assert "error: unknown option --batchez" in result.stderr


@pytest.mark.slow  # seconds of real runs: the full suite runs it, the fast subset does not
def test_a_negative_override_value_is_not_an_option():  # a run, not a question of imports: forked
    result = run_script(
        os.path.join(ROOT, "tools", "dump-dataset.py"), TINY_CONFIG, "++learning_rate", "-1", "--batches", "1"
    )
    assert result.returncode == 2
    assert "must be in [0, inf), but got -1 (from ++learning_rate)" in result.stderr, result.stderr


def test_replay_step_wants_the_saved_step_last():
    result = _tool("replay-step.py", TINY_CONFIG)
    assert result.returncode == 2
    assert "error: the saved step comes last" in result.stderr


def test_check_resume_names_a_signal_it_does_not_know():
    result = _tool("check-resume.py", TINY_CONFIG, "--signals", "KILL,FOO")
    assert result.returncode == 2
    assert "error: --signals: SIGFOO is not a signal" in result.stderr


@pytest.mark.slow  # seconds of real runs: the full suite runs it, the fast subset does not
def test_dump_forward_stats_says_when_it_uses_untrained_parameters_beside_trained_ones(tmp_path):
    prefix = str(tmp_path / "m")
    untrained = run_script(os.path.join(ROOT, "tools", "dump-forward-stats.py"), TINY_CONFIG, "++model", prefix)
    assert untrained.returncode == 0 and "NOTE" not in untrained.stderr  # nothing trained yet: nothing to say
    assert run_rnn(TINY_CONFIG, "++model", prefix, "++num_epochs", "1").returncode == 0
    args = (TINY_CONFIG, "++model", prefix, "--batches", "1")
    result = run_script(os.path.join(ROOT, "tools", "dump-forward-stats.py"), *args)
    assert result.returncode == 0, result.stderr
    assert "NOTE: without --checkpoint the model has its initial, untrained parameters, although training saved 1 " in (
        result.stderr
    )
    assert f"for the trained ones: --checkpoint {prefix}.001.pt" in result.stderr
    trained = run_script(
        os.path.join(ROOT, "tools", "dump-forward-stats.py"), *args, "--checkpoint", f"{prefix}.001.pt"
    )
    assert trained.returncode == 0 and "NOTE" not in trained.stderr
