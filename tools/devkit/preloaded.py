"""``python rnn.py ARGS`` and ``python tools/NAME.py ARGS`` as child processes that start with torch imported.

Importing torch (and torch._dynamo, which the first optimizer imports) takes about 5 seconds on a
small machine, far more than a tiny run, and a test suite starts a hundred runs. So the runs are
forked from a server process that has imported torch and the framework once (multiprocessing's
forkserver). Each run is still its own process: its own working directory, environment, stdout
and stderr files, signal handlers and exit status, the script executed as ``__main__`` with
``sys.argv`` set, ending as the interpreter ends (atexit handlers, the excepthook for an uncaught
exception). The scripts must be this checkout's (the framework is imported once, from here).
``FRAMEWORK_TEST_FRESH_PROCESSES=1`` starts every run as a fresh interpreter instead. Used by the
tests (``tests/conftest.py``) and ``tools/check-docs.py --fork``.
"""

from __future__ import annotations

import atexit
import multiprocessing
import os
import runpy
import signal
import subprocess
import sys
import tempfile
import traceback

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
RNN = os.path.join(ROOT, "rnn.py")
PRELOAD = [
    "torch",
    "torch._dynamo",
    "framework.cli",
    "framework.run",  # the engine with the training features (the plugin modules load when a run builds them)
]  # torch.optim imports _dynamo on first use
_context = None


def run_rnn(*args: str, cwd: str | None = None, timeout: float = 120) -> subprocess.CompletedProcess:
    """Run ``python rnn.py ARGS`` in ``cwd`` and capture its output, like ``subprocess.run``."""
    return run_script(RNN, *args, cwd=cwd, timeout=timeout)


def run_script(
    script: str, *args: str, cwd: str | None = None, timeout: float = 120, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess:
    """Run ``python SCRIPT ARGS`` in ``cwd`` (environment ``env``, default this one's) and capture its output."""
    command = [sys.executable, script, *args]
    if os.environ.get("FRAMEWORK_TEST_FRESH_PROCESSES") == "1":
        return subprocess.run(
            command, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL
        )
    with tempfile.TemporaryDirectory(prefix="rnn-run-") as tmp:
        out, err = os.path.join(tmp, "stdout"), os.path.join(tmp, "stderr")
        child = _forkserver().Process(
            target=_run_in_child, args=(command[1:], cwd or os.getcwd(), dict(env or os.environ), out, err)
        )
        child.start()
        child.join(timeout)
        if child.exitcode is None:
            child.kill()
            child.join()
            raise subprocess.TimeoutExpired(command, timeout, _read(out), _read(err))
        return subprocess.CompletedProcess(command, child.exitcode, _read(out), _read(err))


def _forkserver():
    global _context
    if _context is None:
        _context = multiprocessing.get_context("forkserver")
        _context.set_forkserver_preload(PRELOAD)
    return _context


def _read(path: str) -> str:
    """What the run wrote to ``path``; nothing if it died before opening it (the server printed why)."""
    if not os.path.exists(path):
        return ""
    with open(path, encoding="utf-8", errors="replace") as f:
        return f.read()


def _run_in_child(argv: list[str], cwd: str, env: dict[str, str], out: str, err: str) -> None:
    """Become ``python SCRIPT ARGS``: directory, environment, output files, then run it as the interpreter would."""
    os.chdir(cwd)
    os.environ.clear()
    os.environ.update(env)
    for fd, path in ((1, out), (2, err)):
        target = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        os.dup2(target, fd)
        os.close(target)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    sys.argv = argv
    code: int | str | None = 0
    interrupted = False
    # as `python SCRIPT` does: the script's directory, then the environment's PYTHONPATH
    extra = [entry for entry in env.get("PYTHONPATH", "").split(os.pathsep) if entry]
    sys.path[:0] = [os.path.dirname(os.path.abspath(argv[0])), *extra]
    try:
        runpy.run_path(argv[0], run_name="__main__")
    except SystemExit as exc:
        code = exc.code
    except KeyboardInterrupt:
        sys.excepthook(*sys.exc_info())
        interrupted = True
    except BaseException:  # what the interpreter does with an uncaught exception
        sys.excepthook(*sys.exc_info())
        code = 1
    try:
        atexit._run_exitfuncs()
    except BaseException:
        traceback.print_exc()
    if isinstance(code, str):
        print(code, file=sys.stderr)
        code = 1
    sys.stdout.flush()
    sys.stderr.flush()
    if interrupted:  # Python ends on an uncaught KeyboardInterrupt by dying of SIGINT
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGINT)
    os._exit(code or 0)
