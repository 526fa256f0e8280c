"""The installed commands: ``rnn``, ``framework-NAME`` per tool and ``python -m framework``, and the extras tools need."""

import ast
import fnmatch
import os
import subprocess
import sys

import pytest

from conftest import ROOT, TINY_CONFIG
from framework.commands import PROJECT_TOOLS, TOOLS

BIN = os.path.dirname(sys.executable)  # the virtualenv's scripts: pip install put the commands here


def _setup_keyword(name):
    """A keyword argument of setup.py's setup() call, as a Python value."""
    with open(os.path.join(ROOT, "setup.py"), encoding="utf-8") as f:
        call = next(
            n for n in ast.walk(ast.parse(f.read())) if isinstance(n, ast.Call) and ast.unparse(n.func) == "setup"
        )
    return ast.literal_eval(next(k.value for k in call.keywords if k.arg == name))


def _run(command, *args, cwd=None):
    return subprocess.run(
        [*command, *args], capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL, cwd=cwd
    )


def test_every_tool_is_a_command_or_named_as_the_projects_own():
    scripts = {name[:-3] for name in os.listdir(os.path.join(ROOT, "tools")) if name.endswith(".py")}
    assert scripts == set(TOOLS) | set(PROJECT_TOOLS)
    console = _setup_keyword("entry_points")["console_scripts"]
    names = {line.split("=")[0].strip(): line.split("=")[1].strip() for line in console}
    assert names == {"rnn": "framework.commands:rnn", **{f"framework-{t}": "framework.commands:tool" for t in TOOLS}}


@pytest.mark.parametrize("name", sorted(TOOLS))
def test_each_installed_command_answers_help_under_its_own_name(name):
    result = _run([os.path.join(BIN, f"framework-{name}")], "--help")
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith(f"usage: framework-{name} ")


@pytest.mark.slow  # seconds of real runs: the full suite runs it, the fast subset does not
def test_rnn_command_trains_a_config_like_rnn_py(tmp_path):
    result = _run([os.path.join(BIN, "rnn")], TINY_CONFIG, "++num_epochs", "1", "++model", "None", cwd=str(tmp_path))
    assert result.returncode == 0, result.stderr
    assert "Epoch 1 evaluation: dev: ce" in result.stdout
    assert _run([os.path.join(BIN, "rnn")], "--help").stdout.startswith("usage: rnn config.py")


def test_python_m_framework_runs_a_tool_and_lists_them_all(tmp_path):
    listing = _run([sys.executable, "-m", "framework", "--help"], cwd=ROOT)
    assert listing.returncode == 0
    assert all(f"  {name} " in listing.stdout for name in [*TOOLS, *PROJECT_TOOLS])
    usage_error = _run([sys.executable, "-m", "framework", "replay-step", TINY_CONFIG], cwd=ROOT)
    assert usage_error.returncode == 2
    assert "python -m framework replay-step: error: the saved step comes last" in usage_error.stderr
    # The checkout's scripts stay what they were.
    assert _run([sys.executable, os.path.join(ROOT, "tools", "replay-step.py"), "--help"]).stdout.startswith(
        "usage: python tools/replay-step.py "
    )


def test_compare_with_returnn_names_the_extra_that_brings_what_it_misses(tmp_path):
    # A launcher where RETURNN's dm-tree cannot be imported: the tool must say what to install, not fail later.
    launcher = tmp_path / "launch.py"
    launcher.write_text(
        "import runpy, sys\n"
        "sys.modules['tree'] = None\n"
        f"sys.argv = [{os.path.join(ROOT, 'tools', 'compare-with-returnn.py')!r}, '--epochs', '1']\n"
        "runpy.run_path(sys.argv[0], run_name='__main__')\n"
    )
    result = _run([sys.executable, str(launcher)])
    assert result.returncode == 2
    assert 'needs dm-tree, which the returnn extra installs: pip install -e ".[returnn]"' in result.stderr
    assert {"returnn", "dm-tree"} <= set(_setup_keyword("extras_require")["returnn"])
    tested = {requirement.split("==")[0] for requirement in _setup_keyword("extras_require")["test"]}
    assert set(_setup_keyword("extras_require")["returnn"]) <= tested


def test_only_the_users_tools_are_installed(tmp_path):
    """The project's own tools read a checkout: setup.py's build leaves them (and the devkit harness) out."""
    result = _run([sys.executable, "setup.py", "-q", "build_py", "-d", str(tmp_path)], cwd=ROOT)
    assert result.returncode == 0, result.stderr
    shipped = {name[:-3] for name in os.listdir(tmp_path / "framework_tools") if name.endswith(".py")}
    assert shipped == set(TOOLS)
    assert os.path.isfile(tmp_path / "framework" / "assembly.py")


def test_every_file_of_the_package_that_is_not_python_is_shipped():
    # A wheel holds the .py files of the packages and only the data that package_data names.
    shipped = _setup_keyword("package_data")
    missing = []
    for directory, _, files in os.walk(os.path.join(ROOT, "framework")):
        for name in files:
            if name.endswith((".py", ".pyc")):
                continue
            path = os.path.relpath(os.path.join(directory, name), ROOT)
            owners = [pkg for pkg in shipped if path.startswith(pkg.replace(".", os.sep) + os.sep)]
            prefix = {pkg: len(pkg.replace(".", os.sep)) + 1 for pkg in owners}
            if not any(fnmatch.fnmatch(path[prefix[pkg] :], pattern) for pkg in owners for pattern in shipped[pkg]):
                missing.append(path)
    assert missing == [], "add them to setup.py's package_data"
