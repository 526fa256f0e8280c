"""``python SCRIPT ARGS`` in a pseudo-terminal, driven through pexpect, forked from the preloaded server.

``spawn_script`` returns what ``pexpect.spawn(sys.executable, [SCRIPT, *ARGS], ...)`` returns, a ``pexpect.spawn``,
but its process is forked from the server of devkit/preloaded.py (torch imported) instead of a fresh interpreter
(about 4.5 s of CPU less per run). What the run sees is what pexpect gives a fresh one: a new pseudo-terminal
(pexpect's window size and echo setting) as standard input, output and error and as the controlling terminal of
a new session it leads, ``sys.std*`` as Python opens them on a terminal, the signal dispositions of a fresh
interpreter. ``pid``, ``kill``, ``isalive``, ``wait`` and ``close`` (``exitstatus``, ``signalstatus``) work as
pexpect's do. The limits of devkit/preloaded.py's forked runs hold (the script must be this checkout's, no
``python -m``, modules the server imported are not imported again); ``FRAMEWORK_TEST_FRESH_PROCESSES=1``
spawns a fresh interpreter instead.
"""

from __future__ import annotations

import os
import sys
import termios
from multiprocessing.connection import Connection

import pexpect
import ptyprocess

from devkit import preloaded


def spawn_rnn(*args: str, **spawn_options) -> pexpect.spawn:
    """``pexpect.spawn(sys.executable, [rnn.py, *ARGS], **spawn_options)``, forked (see the module's docstring)."""
    return spawn_script(preloaded.RNN, *args, **spawn_options)


def spawn_script(script: str, *args: str, **spawn_options) -> pexpect.spawn:
    """``pexpect.spawn(sys.executable, [SCRIPT, *ARGS], **spawn_options)``, forked (see the module's docstring).

    ``spawn_options`` are pexpect.spawn's (``env``, ``cwd``, ``timeout``, ``encoding``, ``dimensions``, ``echo``,
    ...), except ``preexec_fn`` and ``ignore_sighup`` (code to run in the child before exec: there is no exec)."""
    spawn = pexpect.spawn if preloaded._fresh_processes() else _ForkedSpawn
    return spawn(sys.executable, [script, *args], **spawn_options)


class _ForkedSpawn(pexpect.spawn):
    """``pexpect.spawn`` whose child is a forked run (``_ForkedPty``) instead of an exec'd one."""

    def _spawnpty(self, args: list[bytes | str], **kwargs) -> ptyprocess.PtyProcess:
        return _ForkedPty.start([os.fsdecode(arg) for arg in args], **kwargs)


class _ForkedPty(ptyprocess.PtyProcess):
    """The terminal's master end and a run forked from the server with the slave end, as ``PtyProcess.spawn`` makes
    one with an exec'd child. The run is the server's child, not this process's: its exit status comes from
    multiprocessing instead of ``waitpid``."""

    @classmethod
    def start(
        cls,
        argv: list[str],
        cwd: str | None = None,
        env: dict[str, str] | None = None,
        echo: bool = True,
        preexec_fn=None,
        dimensions: tuple[int, int] = (24, 80),
    ) -> _ForkedPty:
        """``PtyProcess.spawn(argv, ...)`` for ``argv = [python, SCRIPT, *ARGS]``, forked."""
        if preexec_fn is not None:
            raise ValueError(
                "a forked run has no exec to run preexec_fn (or ignore_sighup) before: use pexpect.spawn for it"
            )
        master, slave = os.openpty()
        termios.tcsetwinsize(slave, dimensions)
        if not echo:
            attributes = termios.tcgetattr(slave)
            attributes[3] &= ~termios.ECHO  # lflag
            termios.tcsetattr(slave, termios.TCSANOW, attributes)
        terminal = Connection(slave)  # multiprocessing passes a Connection's descriptor to the child
        try:
            process = preloaded._forkserver().Process(
                target=preloaded._run_in_terminal,
                args=(argv[1:], cwd or os.getcwd(), dict(env or os.environ), terminal),
            )
            process.start()
        except BaseException:
            os.close(master)
            raise
        finally:
            terminal.close()
        run = cls(process.pid, master)
        run.argv, run.env, run.launch_dir = argv, env, cwd
        run._process = process
        return run

    def isalive(self) -> bool:
        """Whether the run has not ended; once it has, ``exitstatus`` or ``signalstatus`` (and ``status``) say how.
        After EOF on the terminal it waits for the end, as ptyprocess's ``waitpid`` does."""
        if self.terminated:
            return False
        if self.flag_eof:
            self._process.join()
        code = self._process.exitcode
        if code is None:
            return True
        self.status = code << 8 if code >= 0 else -code  # as waitpid encodes it
        self.exitstatus, self.signalstatus = (code, None) if code >= 0 else (None, -code)
        self.terminated = True
        return False

    def wait(self) -> int | None:
        """Wait for the end; return the exit status (None when a signal ended it)."""
        self._process.join()
        self.isalive()
        return self.exitstatus
