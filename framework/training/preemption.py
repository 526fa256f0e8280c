"""Preemption: on ``requeue_signal``, checkpoint at the next update boundary, requeue the job and exit 130.

A cluster about to take the nodes away (SLURM's ``--signal=USR2@90``: SIGUSR2 90 s before the
time limit) sends a signal; training then stops as on SIGTERM (the checkpoint
``<model>.interrupted.pt`` after the current update), and rank 0, once that file is complete, runs
``requeue_command`` (default under SLURM: ``scontrol requeue $SLURM_JOB_ID``). The run exits with
status 130 like every stop with a checkpoint: a cluster configured with ``RequeueExit=130``
requeues on that status alone. The requeued job runs the same command and resumes bit for bit.

The signal is off by default: SIGUSR1, Lightning's requeue signal, already dumps every thread's
stack (``framework.debug.crash``) and stays that; SIGINT, SIGTERM and SIGHUP already stop with a
checkpoint. Under torchrun the agent must pass the signal on to the workers:
``torchrun --signals-to-handle=SIGTERM,SIGINT,SIGHUP,SIGQUIT,SIGUSR2`` (see docs/distributed.rst).
"""

from __future__ import annotations

import os
import signal
import subprocess
import threading
from typing import Any

from framework.base import log
from framework.base.config import Config
from framework.base.errors import ConfigError
from framework.base.findings import Finding, report
from framework.base.options import register
from framework.core.events import Event
from framework.core.plugin import Plugin, on
from framework.core.state import RunState
from framework.training import checkpoint, distributed

register(
    "requeue_signal",
    "str | int | None",
    None,
    "A signal (e.g. 'SIGUSR2', sent by SLURM's --signal=USR2@90) on which training writes its checkpoint at the "
    "next update boundary, runs requeue_command on rank 0 and exits 130. None: off (SIGUSR1 dumps the stacks).",
    __name__,
)
register(
    "requeue_command",
    "list[str] | None",
    None,
    "The command that requeues the job after a requeue_signal stop. None: scontrol requeue $SLURM_JOB_ID when "
    "running under SLURM, else none.",
    __name__,
)


# Signals with a meaning already (or none possible): the reason a requeue_signal may not be one of them.
_TAKEN = {
    "SIGUSR1": "it dumps every thread's stack (framework.debug.crash)",
    "SIGINT": "it already stops training with a checkpoint (Ctrl-C)",
    "SIGTERM": "it already stops training with a checkpoint",
    "SIGHUP": "it already stops training with a checkpoint",
    "SIGKILL": "no process can handle it",
    "SIGSTOP": "no process can handle it",
}


def parse_signal(value: str | int) -> signal.Signals:
    """The signal ``requeue_signal`` names ('SIGUSR2', 'USR2' or a number); ConfigError if it cannot be one."""
    try:
        if isinstance(value, int):
            signum = signal.Signals(value)
        else:
            signum = signal.Signals["SIG" + value.strip().upper().removeprefix("SIG")]
    except (KeyError, ValueError):
        raise ConfigError(
            f"requeue_signal = {value!r} is not a signal on this system. Give a name such as 'SIGUSR2' (and send the "
            f"same signal, e.g. sbatch --signal=USR2@90)."
        ) from None
    if signum.name in _TAKEN:
        raise ConfigError(
            f"requeue_signal = {value!r}: {signum.name} cannot request a requeue, because {_TAKEN[signum.name]}. Use "
            f"another signal, e.g. requeue_signal = 'SIGUSR2' with sbatch --signal=USR2@90."
        )
    return signum


def requeue_command(config: Config) -> list[str] | None:
    """The configured ``requeue_command``; by default ``scontrol requeue $SLURM_JOB_ID`` under SLURM, else None."""
    command = config.get("requeue_command")
    if command is not None:
        return list(command)
    job = os.environ.get("SLURM_JOB_ID")
    return ["scontrol", "requeue", job] if job else None


class Preemption(Plugin):
    """Turns ``requeue_signal`` into a stop with a checkpoint, then (rank 0) into a requeue of the job."""

    after = ("*",)  # its CLOSE callback runs after the others: the requeue may end this process

    def __init__(self, signum: signal.Signals, command: list[str] | None):
        self.signum, self.command = signum, command
        self.previous: Any = None
        self.received = False

    @classmethod
    def from_config(cls, config: Config, state: RunState) -> Preemption | None:
        value = config.get("requeue_signal")
        if value is None:
            return None
        signum = parse_signal(value)
        if threading.current_thread() is not threading.main_thread():
            return None  # only the main thread can handle signals
        rank_0 = state.distributed is None or state.distributed.rank == 0
        return cls(signum, requeue_command(config) if rank_0 else None)

    @on(Event.STARTUP)
    def handle_signal(self, state: RunState) -> None:
        self.previous = signal.signal(self.signum, lambda signum, frame: self._on_signal(state))

    def _on_signal(self, state: RunState) -> None:
        if self.received:  # also sent by torchrun's agent after the cluster sent it: one stop
            return
        self.received = True
        distributed.ask_to_stop(state, f"{self.signum.name}, requeue_signal", requeue=True)
        log.v1(f"{self.signum.name} (requeue_signal): writing a checkpoint after the current step, then requeueing.")

    @on(Event.CLOSE)
    def requeue(self, state: RunState) -> None:
        if self.previous is not None:  # STARTUP ran
            signal.signal(self.signum, self.previous)
        # The signal may have reached another rank only (a node's scheduler): the ranks agreed on it when they stopped.
        asked = self.received or (state.distributed is not None and state.distributed.requeue_agreed)
        if not asked or state.outcome != "interrupted":
            return
        if self.command is None:
            if state.distributed is None or state.distributed.rank == 0:
                log.v3("No requeue_command (not under SLURM): run the same command again to resume.")
            return
        prefix = state.config.get("model")
        if not prefix or not os.path.exists(checkpoint.interrupted_path(prefix)):
            log.v1("Not requeueing: no checkpoint was written to resume from (is 'model' set?).")
            return
        shown = " ".join(self.command)
        try:
            result = subprocess.run(self.command, capture_output=True, text=True, stdin=subprocess.DEVNULL)
            failure = None if result.returncode == 0 else f"exit status {result.returncode}: {result.stderr.strip()}"
        except OSError as exc:  # e.g. no scontrol on this node
            failure = str(exc)
        if failure is not None:
            report(
                Finding(
                    "error",
                    "requeue",
                    f"the requeue command ({shown}) failed ({failure[:500]}). The checkpoint is complete: requeue the "
                    f"job yourself or run the same command again.",
                    evidence={"failure": failure[:500]},
                    where={"command": shown},
                    fix="requeue the job yourself or run the same command again",
                ),
                verbosity=1,
            )
            return
        log.v3(f"Requeued the job: {shown}")


PLUGINS = (Preemption,)
