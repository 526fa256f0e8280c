"""``python rnn.py ARGS`` and ``python tools/NAME.py ARGS`` as child processes that start with torch imported.

Importing torch (and torch._dynamo, which the first optimizer imports) takes about 5 seconds on a
small machine, far more than a tiny run, and a test suite starts a hundred runs. So the runs are
forked from a server process that has imported torch and the framework once (multiprocessing's
forkserver). Each run is still its own process: its own working directory, environment, stdout
and stderr files, signal handlers and exit status, the script executed as ``__main__`` with
``sys.argv`` set, ending as the interpreter ends (atexit handlers, the excepthook for an uncaught
exception). The scripts must be this checkout's (the framework is imported once, from here).
``run_rnn``/``run_script`` wait for the end, like ``subprocess.run``; ``start_rnn``/``start_script``
return at once, like ``subprocess.Popen``, with the output on pipes: for tests that signal or kill a
live run. A forked run has the signal dispositions of a fresh interpreter, but no controlling terminal,
stdin is /dev/null or ``run_script``'s ``input`` (devkit/terminal.py forks runs in a pseudo-terminal, for pexpect),
and it ends by ``os._exit`` after the atexit handlers, without waiting for non-daemon threads: a test about how the
interpreter itself ends needs a fresh one (``python -m pdb`` runs forked as pdb's script: ``pdb.__file__``).
``FRAMEWORK_TEST_FRESH_PROCESSES=1`` starts every run as a fresh interpreter instead. Used by the tests
(``tests/conftest.py``) and ``tools/check-docs.py --fork``.
"""

from __future__ import annotations

import atexit
import contextlib
import faulthandler
import fcntl
import io
import multiprocessing
import os
import runpy
import signal
import subprocess
import sys
import tempfile
import termios
import threading
import time
import traceback
from collections.abc import Callable
from multiprocessing import forkserver

from devkit import hang_report

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
RNN = os.path.join(ROOT, "rnn.py")
# What a forked run's own ``python SCRIPT ...`` children run forked too (_fork_rnn_runs): rnn.py, and the framework's
# command that the tools start (framework.commands.RNN_SCRIPT).
RUN_SCRIPTS = {os.path.realpath(path) for path in (RNN, os.path.join(ROOT, "framework", "__main__.py"))}
TOOLS = os.path.join(ROOT, "tools")
PRELOAD = [
    "torch",
    "torch._dynamo",
    "framework.cli",
    "framework.assembly",  # the engine with the built-in plugins
    "torch.utils.tensorboard",  # the model graph's writer (0.5 s: tensorboard's TensorFlow stub, boto3)
    # report.html's drawing (matplotlib, ~1 s): for the report commands forked from here and the pages a run forks
    # (``python -m framework report DIR``, _fork_rnn_runs), which are most of a page's CPU otherwise
    "framework.run_report",
    "devkit.warm_server",  # the plugin modules and their declared options; last: it freezes what is there
]  # torch.optim imports _dynamo on first use
_context = None
# Set to "1" in a forked run's environment: no report.html unless its config sets report_html (_no_page_unless_asked).
NO_PAGE = "FRAMEWORK_TEST_NO_PAGE"
# Set to "1" in a forked tool's environment: its own rnn.py runs start as fresh interpreters (run_script's fresh_runs).
FRESH_RUNS = "FRAMEWORK_TEST_FRESH_RUNS"
# A forked torchrun job's signal handlers and process name, before its agent set its own.
_fresh_signal_handlers: dict[int, object] = {}
_fresh_process_name = ""


def run_rnn(
    *args: str, cwd: str | None = None, timeout: float = 120, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess:
    """Run ``python rnn.py ARGS`` in ``cwd`` (environment ``env``, default this one's) and capture its output."""
    return run_script(RNN, *without_page(args), cwd=cwd, timeout=timeout, env=env)


def without_page(args: tuple[str, ...]) -> tuple[str, ...]:
    """``args`` of a training run plus ``++report_html False``, unless they set report_html themselves: a run's
    page costs a process of about 2.5 s of CPU at its end (matplotlib), which the tests of other things need not pay.
    A run of a config file: ``.py``, or RETURNN's ``.config``."""
    if any("report_html" in a for a in args) or any(a.startswith("-") for a in args):  # rnn.py --help-options...
        return args
    configs = any(a.endswith((".py", ".config")) for a in args)
    return (*args, "++report_html", "False") if configs else args


def run_script(
    script: str,
    *args: str,
    cwd: str | None = None,
    timeout: float = 120,
    env: dict[str, str] | None = None,
    input: str | None = None,
    fresh_runs: bool = False,
) -> subprocess.CompletedProcess:
    """Run ``python SCRIPT ARGS`` in ``cwd`` (environment ``env``, default this one's) and capture its output; its
    standard input is ``input`` (as ``subprocess.run(..., input=input)`` gives it), or /dev/null without one.

    A tool's own ``python rnn.py ...`` runs (subprocess.Popen/run with ``sys.executable`` and this checkout's
    rnn.py) are forked from the tool's process too (``_fork_rnn_runs``), unless ``fresh_runs``: for a tool whose runs
    must be independent interpreters (tools/check-determinism.py: each its own hash seed)."""
    command = [sys.executable, script, *args]
    if fresh_runs:
        env = {**(os.environ if env is None else env), FRESH_RUNS: "1"}
    if _fresh_processes():
        return _run_fresh(command, cwd, env, timeout, input)
    return _run_forked(_run_in_child, command[1:], command, cwd, env, timeout, input)


def run_module(
    module: str, *args: str, cwd: str | None = None, timeout: float = 120, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess:
    """Run ``python -m MODULE ARGS`` in ``cwd`` (environment ``env``, default this one's) and capture its output:
    the module's code runs as ``__main__`` (``runpy.run_module``, as ``-m`` does: ``sys.argv[0]`` its file, the
    working directory first on ``sys.path``). For a library's own command, RETURNN's ``python -m returnn CONFIG``
    (the reference the RETURNN tests compare with): the library is the installed one, its imports of torch and
    torch._dynamo (its optimizer's) the server's, about 7 s of CPU a run."""
    command = [sys.executable, "-m", module, *args]
    if _fresh_processes():
        return _run_fresh(command, cwd, env, timeout)
    return _run_forked(_module_in_child, [module, *args], command, cwd, env, timeout)


def run_rnn_on_tmpfs(
    disk: str, mount_options: str, after: str, *args: str, cwd: str | None = None, timeout: float = 120
) -> subprocess.CompletedProcess:
    """``python rnn.py ARGS`` with the directory ``disk`` a tmpfs of its own (``mount -t tmpfs -o MOUNT_OPTIONS``) in
    a private user and mount namespace (``unshare -rm``); once the run and its children have ended, what is on the
    tmpfs is copied into ``after``; the exit status is the run's (128 + N where a signal N ended it, as ``sh``
    gives), or 99 where the namespace or the mount failed (stderr says why). The arguments stay as written: the run
    draws its page unless they say otherwise.

    Forked from the preloaded server: the child enters the namespaces and mounts, then forks the run (the
    ``python rnn.py`` that ``unshare -rm sh -c 'mount ...; "$0" "$@"; cp -a ...'`` would exec, without paying the
    imports again) and copies after it. Under ``FRAMEWORK_TEST_FRESH_PROCESSES=1``, that very command."""
    command = [sys.executable, RNN, *args]
    if _fresh_processes():
        script = (
            f'mount -t tmpfs -o {mount_options} tmpfs "{disk}" || exit 99; '
            f'"$0" "$@"; rc=$?; cp -a "{disk}/." "{after}/"; exit $rc'
        )
        return _run_fresh(["unshare", "-rm", "sh", "-c", script, *command], cwd, None, timeout)
    return _run_forked(_run_on_tmpfs_in_child, [disk, mount_options, after, *command[1:]], command, cwd, None, timeout)


def _run_on_tmpfs_in_child(argv: list[str], cwd: str, env: dict[str, str], out, err) -> None:
    """``argv``: the tmpfs's directory, its mount options, the directory to copy it to, then ``SCRIPT ARGS``."""
    import ctypes
    import shutil

    disk, mount_options, after, *script = argv
    libc = ctypes.CDLL(None, use_errno=True)

    def check(result: int, what: str) -> None:
        if result != 0:
            raise OSError(ctypes.get_errno(), f"{what}: {os.strerror(ctypes.get_errno())}")

    clone_newuser, clone_newns, ms_rdonly, ms_rec, ms_private = 0x10000000, 0x00020000, 1, 0x4000, 0x40000
    uid, gid = os.geteuid(), os.getegid()
    try:
        check(libc.unshare(clone_newuser | clone_newns), "unshare")  # unshare -rm: root inside, mapped to this user
        for name, text in (("setgroups", "deny"), ("uid_map", f"0 {uid} 1"), ("gid_map", f"0 {gid} 1")):
            with open(f"/proc/self/{name}", "w", encoding="ascii") as f:
                f.write(text)
        check(libc.mount(b"none", b"/", None, ms_rec | ms_private, None), "mount --make-rprivate /")
        flags = ms_rdonly if "ro" in mount_options.split(",") else 0
        data = ",".join(option for option in mount_options.split(",") if option not in ("ro", "rw"))
        check(libc.mount(b"tmpfs", os.fsencode(disk), b"tmpfs", flags, data.encode()), f"mount tmpfs on {disk}")
    except OSError as exc:  # the status the shell command gives when its mount fails, with why
        with open(err, "w", encoding="utf-8") as f:
            f.write(f"{exc}\n")
        os._exit(99)
    pid = os.fork()
    if pid == 0:
        try:
            _run_in_child(script, cwd, env, out, err)
        finally:
            os._exit(127)
    _, status = os.waitpid(pid, 0)
    code = os.waitstatus_to_exitcode(status)
    shutil.copytree(disk, after, symlinks=True, dirs_exist_ok=True)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(128 - code if code < 0 else code)


def _fresh_processes() -> bool:
    """Whether ``FRAMEWORK_TEST_FRESH_PROCESSES=1`` asks for a fresh interpreter per run."""
    return os.environ.get("FRAMEWORK_TEST_FRESH_PROCESSES") == "1"


def _run_fresh(
    command: list[str], cwd: str | None, env: dict[str, str] | None, timeout: float, input: str | None = None
) -> subprocess.CompletedProcess:
    stdin = {"input": input} if input is not None else {"stdin": subprocess.DEVNULL}
    return subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout, **stdin)


def _run_forked(
    target: Callable,
    argv: list[str],
    command: list[str],
    cwd: str | None,
    env: dict[str, str] | None,
    timeout: float,
    input: str | None = None,
) -> subprocess.CompletedProcess:
    """``target(argv, cwd, env, stdout file, stderr file)`` (and the file of ``input`` when given) in a child of the
    server (environment ``env``, default this one's); ``command`` is what it stands for."""
    with tempfile.TemporaryDirectory(prefix="rnn-run-") as tmp:
        out, err = os.path.join(tmp, "stdout"), os.path.join(tmp, "stderr")
        args = (argv, cwd or os.getcwd(), dict(env or os.environ), out, err)
        if input is not None:
            with open(os.path.join(tmp, "stdin"), "w", encoding="utf-8") as f:
                f.write(input)
            args += (f.name,)
        child = _forkserver().Process(target=target, args=args)
        child.start()
        child.join(timeout)
        if child.exitcode is None:  # all its processes (torchrun's workers too), after saying where they stood
            processes = hang_report.process_tree(child.pid)
            stacks = hang_report.describe(processes)
            hang_report.kill(processes)
            child.join()
            raise RunTimedOut(command, timeout, _read(out), _read(err), stacks)
        return subprocess.CompletedProcess(command, child.exitcode, _read(out), _read(err))


class RunTimedOut(subprocess.TimeoutExpired):
    """``subprocess.TimeoutExpired`` of a forked run whose message (what a failed test shows) also has the end of the
    run's output and where each of its processes stood (``stacks``, from devkit/hang_report.py)."""

    def __init__(self, cmd: list[str], timeout: float, output: str, stderr: str, stacks: str) -> None:
        super().__init__(cmd, timeout, output, stderr)
        self.stacks = stacks

    def __str__(self) -> str:
        def tail(text: str | None) -> str:
            return "\n".join((text or "").splitlines()[-30:])

        return (
            f"{super().__str__()}\n--- the end of its stdout:\n{tail(self.stdout)}\n--- the end of its stderr:\n"
            f"{tail(self.stderr)}\n--- its processes as it timed out:\n{self.stacks}"
        )


def run_torchrun(
    *args: str,
    torchrun_args: tuple[str, ...] = ("--nproc_per_node=2", "--standalone"),
    cwd: str | None = None,
    timeout: float = 180,
    env: dict[str, str] | None = None,
) -> subprocess.CompletedProcess:
    """Run ``python -m torch.distributed.run TORCHRUN_ARGS rnn.py ARGS`` in ``cwd`` (environment ``env``, default
    this one's) and capture its output.

    The launcher is torchrun's own (its argument parser, elastic agent, rendezvous, the workers' environment,
    restarts, its report of a failed worker), run in a child forked from the preloaded server, and its workers
    are forked from that child instead of exec'd as ``python -u rnn.py ARGS``: each rank is still a process
    of its own (its own session, fresh signal handlers, unbuffered output, ``sys.argv``), without paying the
    imports again. What differs is the end of a job whose worker failed: torch.multiprocessing, not the agent's
    poll, terminates the other workers, and the summary names the first failure only (of ``_rank_main``, not of
    rnn.py). So tests of how such a job ends, and of the ``torchrun`` command itself (signals to it, a worker's
    command line), start ``python -m torch.distributed.run`` as a subprocess instead."""
    command, launcher_argv = _torchrun_commands(torchrun_args, without_page(args))
    if _fresh_processes():
        return _run_fresh(command, cwd, env, timeout)
    return _run_forked(_launch_in_child, launcher_argv, command, cwd, env, timeout)


def start_torchrun(
    *args: str,
    torchrun_args: tuple[str, ...] = ("--nproc_per_node=2", "--standalone"),
    cwd: str | None = None,
    env: dict[str, str] | None = None,
) -> StartedRun:
    """Start ``python -m torch.distributed.run TORCHRUN_ARGS rnn.py ARGS`` in ``cwd`` (environment ``env``, default
    this one's), its output on pipes, like ``subprocess.Popen``: the launcher of ``run_torchrun`` (forked, and so is
    each worker), for tests that signal a live job's workers. Either way the workers are the launcher's children."""
    command, launcher_argv = _torchrun_commands(torchrun_args, without_page(args))
    return StartedRun(command, cwd, env, target=_launch_in_child, argv=launcher_argv)


def _torchrun_commands(torchrun_args: tuple[str, ...], args: tuple[str, ...]) -> tuple[list[str], list[str]]:
    """The torchrun command line of ``rnn.py ARGS``, and the arguments of its forked launcher (see run_torchrun)."""
    command = [sys.executable, "-m", "torch.distributed.run", *torchrun_args, RNN, *args]
    return command, [*torchrun_args, "--start-method=fork", "--run-path", RNN, *args]


class StartedRun:
    """A run started by ``start_script`` or ``start_torchrun``: the parts of ``subprocess.Popen`` the tests use.

    ``stdout`` and ``stderr`` are text pipes to read while it runs; ``returncode`` is ``-N`` when signal N ended it.
    Forked, the child runs ``target(argv, cwd, env, stdout end, stderr end)``, by default ``command`` as a script.
    """

    def __init__(
        self,
        command: list[str],
        cwd: str | None,
        env: dict[str, str] | None,
        target: Callable | None = None,
        argv: list[str] | None = None,
    ) -> None:
        self.args = command
        self.returncode: int | None = None
        if _fresh_processes():
            self._popen: subprocess.Popen | None = subprocess.Popen(
                command, cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE
            )
            self.pid = self._popen.pid
            self.stdout, self.stderr = (
                _text(os.dup(pipe.fileno())) for pipe in (self._popen.stdout, self._popen.stderr)
            )
            self._popen.stdout.close()
            self._popen.stderr.close()
            return
        self._popen = None
        context = _forkserver()
        (out_read, out_write), (err_read, err_write) = context.Pipe(duplex=False), context.Pipe(duplex=False)
        argv = command[1:] if argv is None else argv
        self._child = context.Process(
            target=target or _run_in_child,
            args=(argv, cwd or os.getcwd(), dict(env or os.environ), out_write, err_write),
        )
        self._child.start()
        out_write.close()
        err_write.close()
        self.pid = self._child.pid
        self.stdout, self.stderr = (_text(os.dup(end.fileno())) for end in (out_read, err_read))
        out_read.close()
        err_read.close()

    def poll(self) -> int | None:
        """The exit status, or None while it runs."""
        if self.returncode is None:
            if self._popen is not None:
                self.returncode = self._popen.poll()
            elif self._child.exitcode is not None:
                self.returncode = self._child.exitcode
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        """Wait for the end (``subprocess.TimeoutExpired`` after ``timeout`` seconds); return the exit status."""
        if self._popen is not None:
            self.returncode = self._popen.wait(timeout)
            return self.returncode
        self._child.join(timeout)
        if self.poll() is None:
            raise subprocess.TimeoutExpired(self.args, timeout)
        return self.returncode

    def communicate(self, timeout: float | None = None) -> tuple[str, str]:
        """Read the rest of stdout and stderr until both close, wait for the end; return what was read."""
        texts = {}
        readers = [
            threading.Thread(target=lambda f=f: texts.__setitem__(f, f.read())) for f in (self.stdout, self.stderr)
        ]
        for reader in readers:
            reader.start()
        deadline = None if timeout is None else time.monotonic() + timeout
        for reader in readers:
            reader.join(None if deadline is None else max(0.0, deadline - time.monotonic()))
            if reader.is_alive():
                raise subprocess.TimeoutExpired(self.args, timeout)
        self.wait(None if deadline is None else max(0.0, deadline - time.monotonic()))
        self.stdout.close()
        self.stderr.close()
        return texts[self.stdout], texts[self.stderr]

    def send_signal(self, signum: int) -> None:
        """Send ``signum`` to the run unless it has ended."""
        if self.poll() is None:
            os.kill(self.pid, signum)

    def terminate(self) -> None:
        """SIGTERM."""
        self.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        """SIGKILL."""
        self.send_signal(signal.SIGKILL)


def start_rnn(*args: str, cwd: str | None = None, env: dict[str, str] | None = None) -> StartedRun:
    """Start ``python rnn.py ARGS`` in ``cwd``, its output on pipes, like ``subprocess.Popen``."""
    return start_script(RNN, *without_page(args), cwd=cwd, env=env)


def start_script(script: str, *args: str, cwd: str | None = None, env: dict[str, str] | None = None) -> StartedRun:
    """Start ``python SCRIPT ARGS`` in ``cwd`` (environment ``env``, default this one's), its output on pipes."""
    return StartedRun([sys.executable, script, *args], cwd, env)


def _text(fd: int):
    return os.fdopen(fd, "r", encoding="utf-8", errors="replace")


def _forkserver():
    global _context
    if _context is None:
        _context = multiprocessing.get_context("forkserver")
        _context.set_forkserver_preload(PRELOAD)
        # The server imports PRELOAD with the sys.path its environment gives (Python 3.11's forkserver ignores the
        # parent's until it forks a child), and devkit.warm_server lives in tools/.
        before = os.environ.get("PYTHONPATH")
        os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [TOOLS, before]))
        try:
            forkserver.ensure_running()
        finally:
            if before is None:
                del os.environ["PYTHONPATH"]
            else:
                os.environ["PYTHONPATH"] = before
        atexit.register(_kill_live_runs)  # runs before multiprocessing's own handler, which joins them
    return _context


def _kill_live_runs() -> None:
    """Kill the runs still alive as this process ends (a failed test's run waiting at a prompt, say): multiprocessing
    would wait for them forever, where a fresh child would get a hangup from its closed terminal or pipe."""
    for run in multiprocessing.active_children():
        run.kill()


def _read(path: str) -> str:
    """What the run wrote to ``path``; nothing if it died before opening it (the server printed why)."""
    if not os.path.exists(path):
        return ""
    with open(path, encoding="utf-8", errors="replace") as f:
        return f.read()


def _run_in_child(argv: list[str], cwd: str, env: dict[str, str], out, err, stdin: str | None = None) -> None:
    """Become ``python SCRIPT ARGS``: directory, environment, output files (paths or pipe ends), the file ``stdin``
    as standard input if given (else /dev/null, multiprocessing's), then run it as the interpreter would."""
    _become_process(cwd, env, out, err)
    if env.get(NO_PAGE) == "1":
        _no_page_unless_asked()
    if stdin is not None:
        _open_stdin(stdin)
    else:
        _open_std_stream(0, sys.stdout.encoding, sys.stdout.errors, line_buffering=False)  # /dev/null, fd 0
    _as_a_fresh_interpreter()
    if env.get(FRESH_RUNS) != "1":
        _fork_rnn_runs()
    _exit_as_interpreter(_script_as_main(argv))


def _module_in_child(argv: list[str], cwd: str, env: dict[str, str], out, err) -> None:
    """Become ``python -m MODULE ARGS`` (``argv``: the module, then its arguments), standard input /dev/null."""
    _become_process(cwd, env, out, err)
    _open_std_stream(0, sys.stdout.encoding, sys.stdout.errors, line_buffering=False)  # /dev/null, fd 0
    _as_a_fresh_interpreter(first_path_entry=os.getcwd())  # ``python -m``: the directory it starts in
    _exit_as_interpreter(_module_as_main(argv))


def _module_as_main(argv: list[str]) -> Callable[[], object]:
    """A function that runs the module ``argv[0]`` as ``__main__`` with ``argv[1:]`` as its arguments, as ``python -m``
    does (after ``_as_a_fresh_interpreter(first_path_entry=os.getcwd())``)."""

    def run() -> None:
        sys.argv = list(argv)  # run_module puts the module's file in sys.argv[0], as ``-m`` does
        runpy.run_module(argv[0], run_name="__main__", alter_sys=True)

    return run


def _no_page_unless_asked() -> None:
    """In this child, a training run draws no report.html unless its config sets ``report_html`` (as
    tests/conftest.py's ``no_page_unless_asked`` does in process): for a command whose arguments must stay as written,
    where ``without_page`` would add one (the overrides a run prints back, in a replay command, say)."""
    from framework.debug.run_page import RunPage

    drawn = RunPage.from_config.__func__

    def from_config(cls, config, state):
        return drawn(cls, config, state) if config.has("report_html") else None

    RunPage.from_config = classmethod(from_config)


def _open_stdin(path: str) -> None:
    """The file ``path`` as descriptor 0 and ``sys.stdin``, as Python opens a file it is given as standard input
    (block-buffered, the encoding of the server's own streams)."""
    fd = os.open(path, os.O_RDONLY)
    os.dup2(fd, 0)
    os.close(fd)
    _open_std_stream(0, sys.stdout.encoding, sys.stdout.errors, line_buffering=False)


def _launch_in_child(argv: list[str], cwd: str, env: dict[str, str], out, err) -> None:
    """Become ``python -m torch.distributed.run ARGV``, its workers forked from this interpreter (see run_torchrun)."""
    _become_process(cwd, env, out, err)
    _open_std_stream(0, sys.stdout.encoding, sys.stdout.errors, line_buffering=False)  # /dev/null, fd 0
    _as_a_fresh_interpreter(first_path_entry=os.getcwd())  # ``python -m``: the directory it starts in
    global _fresh_signal_handlers, _fresh_process_name
    _fresh_signal_handlers = {signum: signal.getsignal(signum) for signum in signal.valid_signals()}
    with open("/proc/self/comm", encoding="utf-8") as f:
        _fresh_process_name = f.read().strip()
    from torch.distributed import run as launcher

    launcher.run_script_path = _rank_main  # the entry point of a ``--run-path`` job
    _exit_as_interpreter(lambda: launcher.main(argv))


def _rank_main(script: str, *args: str) -> None:
    """One worker of a forked torchrun job: ``python -u SCRIPT ARGS`` as torchrun starts it, in this process.

    The agent's bookkeeping for function workers expects a return on success; any other ending is an exit
    status the agent reads like a subprocess's."""
    import torch.multiprocessing

    os.setsid()  # as torchrun starts its workers (``start_new_session``)
    torch.multiprocessing._set_thread_name(_fresh_process_name)  # not "pt_elastic", the agent's
    for signum, handler in _fresh_signal_handlers.items():  # not the agent's handlers (SIGTERM, SIGINT, ...)
        if handler is not None and signal.getsignal(signum) is not handler:
            signal.signal(signum, handler)
    faulthandler.disable()  # torch's ``record`` wrapper turned it on; a fresh ``python`` starts without it
    _reseed()  # each rank a fresh interpreter's random states, not the launcher's
    sys.path[:] = _fresh_sys_path()
    for name, fd in (("stdout", 1), ("stderr", 2)):  # ``-u``: unbuffered, as torchrun runs its workers
        stream = getattr(sys, name)
        stream.flush()
        raw = open(fd, "wb", buffering=0, closefd=False)  # noqa: SIM115 (the process's stream until it ends)
        setattr(sys, name, io.TextIOWrapper(raw, stream.encoding, stream.errors, write_through=True))
    _exit_as_interpreter(_script_as_main([script, *args]), success_returns=True)


def _become_process(cwd: str, env: dict[str, str], out, err) -> None:
    """This forked child's directory, environment, output files and SIGINT handling, as a fresh process has."""
    os.chdir(cwd)
    os.environ.clear()
    os.environ.update(env)
    for fd, where in ((1, out), (2, err)):
        if isinstance(where, str):
            target = os.open(where, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
            os.dup2(target, fd)
            os.close(target)
        elif isinstance(where, int):  # a descriptor the caller keeps (a terminal, from _run_in_terminal)
            os.dup2(where, fd)
        else:  # a pipe's end (a multiprocessing Connection), from StartedRun
            os.dup2(where.fileno(), fd)
            where.close()
    signal.signal(signal.SIGINT, signal.default_int_handler)
    # The server's children inherit its start method ('forkserver'); a fresh interpreter has none (Linux: fork), so
    # the run's DataLoader workers would each start a server of their own, importing torch again (seconds each).
    multiprocessing.set_start_method(None, force=True)


def _run_in_terminal(argv: list[str], cwd: str, env: dict[str, str], terminal) -> None:
    """Become ``python SCRIPT ARGS`` started in a pseudo-terminal as ``pexpect.spawn`` starts it (``terminal``: a
    Connection holding the terminal's slave end; devkit/terminal.py): leader of a new session whose controlling
    terminal it is, the terminal as standard input, output and error, ``sys.std*`` as Python opens them on one."""
    os.setsid()
    fcntl.ioctl(terminal.fileno(), termios.TIOCSCTTY, 0)
    os.dup2(terminal.fileno(), 0)
    _become_process(cwd, env, terminal.fileno(), terminal.fileno())
    terminal.close()
    _open_stdio_on_terminal()
    _as_a_fresh_interpreter()
    _exit_as_interpreter(_script_as_main(argv))


def _open_stdio_on_terminal() -> None:
    """``sys.std*`` (and ``sys.__std*__``) on descriptors 0-2, a terminal now, as Python opens them at start-up
    (pylifecycle.c, create_stdio): line-buffered on a terminal, unbuffered output with PYTHONUNBUFFERED, the
    encoding and errors of the server's own (its stdin is multiprocessing's /dev/null, utf-8 whatever the locale)."""
    unbuffered = bool(os.environ.get("PYTHONUNBUFFERED"))
    encoding, errors = sys.stdout.encoding, (sys.stdout.errors, sys.stdout.errors, sys.stderr.errors)
    sys.stdout.flush()
    sys.stderr.flush()
    for fd in (0, 1, 2):  # stdin is buffered even with PYTHONUNBUFFERED
        _open_std_stream(fd, encoding, errors[fd], line_buffering=not unbuffered, unbuffered=fd > 0 and unbuffered)


def _open_std_stream(fd: int, encoding: str, errors: str, line_buffering: bool, unbuffered: bool = False) -> None:
    """``sys.stdin``/``stdout``/``stderr`` (``fd`` 0, 1, 2) and its ``sys.__std*__`` twin on that descriptor, as
    Python's start-up builds it (pylifecycle.c, create_stdio): ``unbuffered`` writes through a raw file."""
    name = ("stdin", "stdout", "stderr")[fd]
    buffer = open(fd, "wb" if fd else "rb", buffering=0 if unbuffered else -1, closefd=False)  # noqa: SIM115
    (buffer if unbuffered else buffer.raw).name = f"<{name}>"
    stream = io.TextIOWrapper(
        buffer, encoding, errors, newline="\n", line_buffering=line_buffering, write_through=unbuffered
    )
    stream.mode = "w" if fd else "r"
    setattr(sys, name, stream)
    setattr(sys, f"__{name}__", stream)


def _as_a_fresh_interpreter(first_path_entry: str | None = None) -> None:
    """Put back what a forked child inherits from the server (and, through multiprocessing, from the test process)
    where a fresh ``python SCRIPT`` starts otherwise; after ``_become_process`` and ``sys.std*`` on descriptors 0-2.

    - The descriptors above 2 (the forkserver's pipes, multiprocessing's /dev/null): closed.
    - The random states of numpy's global generator and torch's default generators: every child of the server
      had the server's (Python's ``random`` reseeds itself after a fork); drawn anew, as at a fresh import.
    - torch's intra-op threads: the server's (its OMP_NUM_THREADS), now this run's OMP_NUM_THREADS or the default.
    - ``sys.path``: the test process's (multiprocessing hands it over: the checkout, tools/, the tests' folder),
      now a fresh interpreter's (``_script_as_main`` then puts the script's directory and PYTHONPATH first).
    - multiprocessing's idea of this process: the forkserver's child 'ForkServerProcess-N' with a parent process,
      now the main process of its own, as ``python SCRIPT`` is, without a resource tracker until it needs one.
    What stays: the modules the server imported (torch, the framework: a run imports them anyway, the tests of a
    first import start a fresh interpreter), gc.freeze's frozen objects, and the hash seed of str and bytes (fixed
    at the server's start: a test whose runs must hash differently starts them fresh, as check-determinism's)."""
    os.closerange(3, os.sysconf("SC_OPEN_MAX"))
    _reseed()
    _fresh_threads()
    sys.path[:] = _fresh_sys_path(first_path_entry)
    _main_process()


def _main_process() -> None:
    """multiprocessing's record of this process as a fresh interpreter's (process.py's ``_MainProcess``, which the
    module deletes after making its one instance): 'MainProcess', no parent, no children, a new authentication key,
    and its children numbered from 1 (Process-1, not Process-3:1)."""
    import itertools
    from multiprocessing import process

    main = object.__new__(process.BaseProcess)
    main._identity = ()
    main._name = "MainProcess"
    main._parent_pid = None
    main._popen = None
    main._closed = False
    main._config = {"authkey": process.AuthenticationString(os.urandom(32)), "semprefix": "/mp"}
    process._current_process = main
    process._parent_process = None
    process._children = set()
    process._process_counter = itertools.count(1)
    # No resource tracker yet (the server's, inherited, is on a descriptor closed above): a spawned child, RETURNN's
    # guard around torch.cuda.is_available() say, starts one of its own, as in a fresh interpreter.
    if "multiprocessing.resource_tracker" in sys.modules:
        tracker = sys.modules["multiprocessing.resource_tracker"]._resource_tracker
        tracker._fd = tracker._pid = None


def _reseed() -> None:
    """numpy's global RandomState and torch's default generators drawn anew from the system's entropy, as a fresh
    import seeds them (Python's ``random`` reseeds itself in every forked child: os.register_at_fork)."""
    if "numpy" in sys.modules:
        sys.modules["numpy"].random.seed()
    import torch

    torch.seed()


def _fresh_threads() -> None:
    """torch's intra-op threads as a fresh import in this environment sets them: OMP_NUM_THREADS, else a thread per
    core this process may run on."""
    import torch

    try:
        threads = int(os.environ.get("OMP_NUM_THREADS", ""))
    except ValueError:
        threads = 0
    threads = threads if threads > 0 else len(os.sched_getaffinity(0))
    if torch.get_num_threads() != threads:
        torch.set_num_threads(threads)


def _fresh_sys_path(first_path_entry: str | None = None) -> list[str]:
    """A fresh interpreter's sys.path before its script's directory (``first_path_entry``, when given, instead) and
    PYTHONPATH's entries (warm_server.FRESH_SYS_PATH: the server's own, recorded before any child)."""
    warm = sys.modules.get("devkit.warm_server")
    base = list(warm.FRESH_SYS_PATH) if warm is not None else list(sys.path)
    if first_path_entry is None:
        return base
    extra = [entry for entry in os.environ.get("PYTHONPATH", "").split(os.pathsep) if entry]
    return [first_path_entry, *extra, *base]


def _fork_rnn_runs() -> None:
    """In a forked run's process (a tool's): its ``python rnn.py ...`` children (``subprocess.Popen`` and so ``run``,
    with ``sys.executable`` and RUN_SCRIPTS, no shell, no user or group change), and its ``python -m framework ...``
    ones (the report.html a run draws: with run_report preloaded, ~0.4 s of CPU instead of ~2), are forked from this
    process instead of exec'd, saving the imports of torch (seconds each). Each is still a process of its own, this process's
    child as ``subprocess`` makes it (pid, pipes or files as stdin/stdout/stderr, cwd, env, umask,
    ``start_new_session``, ``process_group``, ``preexec_fn``, ``close_fds``/``pass_fds``, the exit status or ``-N``
    of a signal), then given a fresh interpreter's state: the signal dispositions an exec leaves (handlers back to
    the default, ignored signals still ignored) and Python's start-up sets, what the tool added since it started
    (its modules outside the libraries and the framework, its atexit functions and weakref finalizers, handlers on
    the loggers) taken away, and ``_as_a_fresh_interpreter``'s resets."""
    import logging
    import weakref

    execute = subprocess.Popen._execute_child
    modules = set(sys.modules)
    finalizers = set(weakref.finalize._registry)
    handlers = {name: list(logger.handlers) for name, logger in _loggers(logging).items()}
    registered: list[Callable] = []
    register = atexit.register

    def recording_register(func, *args, **kwargs):
        registered.append(func)
        return register(func, *args, **kwargs)

    atexit.register = recording_register

    def forget_the_tool() -> None:
        atexit.register = register
        for func in registered:
            atexit.unregister(func)
        for finalizer in set(weakref.finalize._registry) - finalizers:
            finalizer.detach()
        for name, logger in _loggers(logging).items():
            for handler in list(logger.handlers):
                if handler not in handlers.get(name, ()):
                    logger.removeHandler(handler)
        libraries = tuple(
            os.path.join(os.path.realpath(where), "")
            for where in {sys.prefix, sys.base_prefix, sys.exec_prefix, os.path.join(ROOT, "framework")}
        )
        for name in set(sys.modules) - modules:
            where = getattr(sys.modules[name], "__file__", None)
            if where is None or not os.path.realpath(where).startswith(libraries):
                del sys.modules[name]

    def execute_child(self, args, executable, preexec_fn, close_fds, pass_fds, cwd, env, startupinfo, creationflags,
                      shell, p2cread, p2cwrite, c2pread, c2pwrite, errread, errwrite, restore_signals, gid, gids,
                      uid, umask, start_new_session, process_group):  # fmt: skip
        plain = not shell and executable is None and isinstance(args, (list, tuple)) and len(args) > 1
        plain = plain and args[0] == sys.executable and (gid, gids, uid) == (None, None, None)
        rnn = plain and isinstance(args[1], str) and os.path.realpath(args[1]) in RUN_SCRIPTS
        # ``python -m framework ...``: the page a run draws (framework.base.util.start_framework_process)
        framework_module = plain and len(args) > 2 and list(args[1:3]) == ["-m", "framework"]
        if not (rnn or framework_module):
            return execute(self, args, executable, preexec_fn, close_fds, pass_fds, cwd, env, startupinfo,
                           creationflags, shell, p2cread, p2cwrite, c2pread, c2pwrite, errread, errwrite,
                           restore_signals, gid, gids, uid, umask, start_new_session, process_group)  # fmt: skip
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            try:
                for fd, source in ((0, p2cread), (1, c2pwrite), (2, errwrite)):
                    if source == fd:
                        os.set_inheritable(fd, True)
                    elif source != -1:
                        os.dup2(source, fd)
                if cwd is not None:
                    os.chdir(cwd)
                if umask >= 0:
                    os.umask(umask)
                if restore_signals:
                    for signum in (signal.SIGPIPE, signal.SIGXFSZ):
                        signal.signal(signum, signal.SIG_DFL)
                if start_new_session:
                    os.setsid()
                if process_group is not None and process_group >= 0:
                    os.setpgid(0, process_group)
                if preexec_fn is not None:
                    preexec_fn()
                keep = set(pass_fds)
                for fd in range(3, os.sysconf("SC_OPEN_MAX")):  # what the exec would close
                    if fd not in keep and (close_fds or not _inheritable(fd)):
                        with contextlib.suppress(OSError):
                            os.close(fd)
                _exec_signal_dispositions()
                os.environ.clear()
                os.environ.update({os.fsdecode(k): os.fsdecode(v) for k, v in (env or {}).items()} if env is not None
                                  else dict(os.environ))  # fmt: skip
                forget_the_tool()
                _open_std_streams()
                if framework_module:
                    _as_a_fresh_interpreter(first_path_entry=os.getcwd())  # ``python -m``: the directory it starts in
                    _exit_as_interpreter(_module_as_main([os.fsdecode(a) for a in args[2:]]))
                _as_a_fresh_interpreter()
                _exit_as_interpreter(_script_as_main([os.fsdecode(a) for a in args[1:]]))
            finally:
                os._exit(127)
        self.pid = pid
        self._child_created = True
        self._close_pipe_fds(p2cread, p2cwrite, c2pread, c2pwrite, errread, errwrite)

    subprocess.Popen._execute_child = execute_child


def _loggers(logging) -> dict:
    """The root logger and every named one, by name."""
    named = {
        name: logger for name, logger in logging.root.manager.loggerDict.items() if isinstance(logger, logging.Logger)
    }
    return {"": logging.root, **named}


def _inheritable(fd: int) -> bool:
    try:
        return os.get_inheritable(fd)
    except OSError:
        return True


def _exec_signal_dispositions() -> None:
    """The signal dispositions of ``python SCRIPT`` exec'd from this process: handled signals back to the default
    (ignored ones stay ignored), then Python's start-up: SIGPIPE and SIGXFSZ ignored, SIGINT's handler raising
    KeyboardInterrupt unless SIGINT is ignored."""
    for signum in signal.valid_signals():
        with contextlib.suppress(OSError, ValueError, TypeError):
            if signal.getsignal(signum) not in (signal.SIG_DFL, signal.SIG_IGN, None):
                signal.signal(signum, signal.SIG_DFL)
    for signum in (signal.SIGPIPE, signal.SIGXFSZ):
        signal.signal(signum, signal.SIG_IGN)
    if signal.getsignal(signal.SIGINT) == signal.SIG_DFL:
        signal.signal(signal.SIGINT, signal.default_int_handler)


def _open_std_streams() -> None:
    """``sys.std*`` on descriptors 0-2 as Python opens them at start-up (pylifecycle.c, create_stdio): stderr and a
    terminal line-buffered, unbuffered output with PYTHONUNBUFFERED."""
    unbuffered = bool(os.environ.get("PYTHONUNBUFFERED"))
    encoding, errors = (
        sys.stdout.encoding,
        (sys.stdin.errors if sys.stdin else "strict", sys.stdout.errors, sys.stderr.errors),
    )
    sys.stdout.flush()
    sys.stderr.flush()
    for fd in (0, 1, 2):
        line_buffering = (os.isatty(fd) or fd == 2) and not unbuffered  # stderr: line-buffered since Python 3.9
        _open_std_stream(fd, encoding, errors[fd], line_buffering=line_buffering, unbuffered=fd > 0 and unbuffered)


def _script_as_main(argv: list[str]) -> Callable[[], object]:
    """A function that runs ``argv[0]`` as ``__main__`` with ``sys.argv`` and ``sys.path`` as ``python SCRIPT`` sets them."""

    def run() -> None:
        sys.argv = argv
        # as `python SCRIPT` does: the script's directory, then the environment's PYTHONPATH
        extra = [entry for entry in os.environ.get("PYTHONPATH", "").split(os.pathsep) if entry]
        sys.path[:0] = [os.path.dirname(os.path.abspath(argv[0])), *extra]
        runpy.run_path(argv[0], run_name="__main__")

    return run


def _exit_as_interpreter(main: Callable[[], object], success_returns: bool = False) -> None:
    """Call ``main`` and end as the interpreter ends after it: the exit status of its ``SystemExit`` or 1 after
    printing an uncaught exception (through ``sys.excepthook``), atexit handlers, death by SIGINT after an
    uncaught KeyboardInterrupt. With ``success_returns``, a status of 0 returns instead of exiting."""
    code: int | str | None = 0
    interrupted = False
    try:
        main()
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
    if success_returns and not code:
        return
    os._exit(code or 0)
