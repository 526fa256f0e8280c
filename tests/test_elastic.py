"""Elastic torchrun: a SIGKILLed rank (rank 1, then rank 0) is restarted by the agent, resumes from the newest
mid-epoch checkpoint and ends bitwise equal to an uninterrupted job; two "nodes" meet through c10d on one machine.

tools/check-elastic.py runs the 10-kill sweep (different ranks, different moments)."""

import concurrent.futures
import os
import signal
import socket
import subprocess
import sys
import threading

import psutil
import pytest
import torch

from conftest import ROOT, TINY_CONFIG, run_torchrun
from framework.testing import checkpoint_differences

pytestmark = pytest.mark.slow  # real torchrun jobs, seconds each

RNN = os.path.join(ROOT, "rnn.py")
# Mid-epoch checkpoints every 2 steps; a progress line per step (rank 0's stdout) to aim the kills at.
ARGS = [TINY_CONFIG, "++torch_distributed", "{}", "++checkpoint_every_n_steps", "2", "++log_verbosity", "5"]


def _launcher(*options: str) -> list[str]:
    return [sys.executable, "-m", "torch.distributed.run", *options, RNN, *ARGS]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _rank(job: subprocess.Popen, rank: int) -> psutil.Process:
    workers = [p for p in psutil.Process(job.pid).children(recursive=True) if RNN in p.cmdline()]
    return next(p for p in workers if p.environ().get("RANK") == str(rank))


def test_killed_ranks_restart_resume_mid_epoch_and_match_a_two_node_job(tmp_path):
    # The reference: two "nodes" of one rank each, meeting through a c10d rendezvous on this machine.
    endpoint = f"127.0.0.1:{_free_port()}"
    node = ["--nnodes=2", "--nproc_per_node=1", "--rdzv-backend=c10d", f"--rdzv-endpoint={endpoint}", "--rdzv-id=t"]

    def node_run(k: int) -> subprocess.CompletedProcess:  # the launchers forked with torch imported (conftest)
        return run_torchrun(
            *ARGS, "++model", str(tmp_path / "ref/m"), "++log", str(tmp_path / f"ref/log{k}"), torchrun_args=node
        )

    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        nodes = list(pool.map(node_run, range(2)))
    assert [p.returncode for p in nodes] == [0, 0], "\n".join(p.stdout + p.stderr for p in nodes)
    assert (tmp_path / "ref/m.002.pt").exists()
    # Rank 1 is SIGKILLed at epoch 1 step 3, the restarted rank 0 at epoch 2 step 2; the agent restarts both times.
    kills = [(1, "ep 1 train, step 3,"), (0, "ep 2 train, step 2,")]
    # Steps of 0.3 s: a kill aimed at a step's line must land within the epoch also when the reader of the
    # output lags behind a busy machine (steps of milliseconds let an epoch end before the kill arrived).
    job = subprocess.Popen(
        [
            *_launcher("--standalone", "--nproc_per_node=2", "--max-restarts=2"),
            "++model",
            str(tmp_path / "job/m"),
            "++step_sleep",
            "0.3",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    lines = []
    deadline = threading.Timer(180, job.kill)  # a restart that never gets going must fail the test, not hang it
    deadline.start()
    try:
        for line in job.stdout:
            lines.append(line)
            if kills and line.startswith(kills[0][1]):
                _rank(job, kills.pop(0)[0]).send_signal(signal.SIGKILL)
        job.wait(timeout=180)
    finally:
        deadline.cancel()
        job.kill()
    out = "".join(lines)
    assert job.returncode == 0 and not kills, out
    assert sum(line.startswith("task train, ") for line in lines) == 3, out  # the first attempt and two restarts
    interrupted = tmp_path / "job/m.interrupted.pt"
    # Each restart continues from the newest mid-epoch checkpoint (which one depends on the kill's moment).
    assert f"Resuming from {interrupted}: epoch 1, global step " in out
    assert f"Resuming from {interrupted}: epoch 2, global step " in out and "Continuing epoch 2 at step " in out
    assert not interrupted.exists()  # the final epoch checkpoint superseded it
    reference, resumed = (torch.load(tmp_path / f"{d}/m.002.pt", weights_only=True) for d in ("ref", "job"))
    assert checkpoint_differences(reference, resumed) == []  # every entry, the mid-epoch resumed epochs' scores too
