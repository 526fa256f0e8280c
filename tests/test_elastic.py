"""Elastic torchrun: a SIGKILLed rank (rank 1, then rank 0) is restarted by the agent, resumes from the newest
mid-epoch checkpoint and ends bitwise equal to an uninterrupted job; two "nodes" meet through c10d on one machine.

tools/check-elastic.py runs the 10-kill sweep (different ranks, different moments)."""

import concurrent.futures
import socket
import subprocess

import pytest
import torch

from conftest import run_torchrun, tiny_config_with
from framework.testing import checkpoint_differences

pytestmark = pytest.mark.slow  # real torchrun jobs, seconds each

# Mid-epoch checkpoints every 2 steps, which each restart resumes from; a progress line per step (rank 0's stdout).
ARGS = ["++torch_distributed", "{}", "++checkpoint_every_n_steps", "2", "++log_verbosity", "5"]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# ``kills``, {attempt: (rank, epoch, global step)}: in that attempt of the job (the agent's restart count), that rank
# SIGKILLs itself as it begins that step. From inside, the kill lands at its step also on a busy machine, and in a rank
# forked from the launcher as in a fresh one (which the test could find from outside); later attempts do not repeat it.
SELF_KILL = (
    "\nimport os as _os, signal as _signal, torch.distributed as _dist\n"
    "kills = {}\n"
    "_train_step = train_step\n"
    "def train_step(*, run_ctx, **kwargs):\n"
    "    attempt = int(_os.environ['TORCHELASTIC_RESTART_COUNT'])\n"
    "    if kills.get(attempt) == (_dist.get_rank(), run_ctx.epoch, run_ctx.step):\n"
    "        print(f'attempt {attempt}: rank {_dist.get_rank()} SIGKILLs itself', flush=True)\n"
    "        _os.kill(_os.getpid(), _signal.SIGKILL)\n"
    "    _train_step(run_ctx=run_ctx, **kwargs)\n"
)


def test_killed_ranks_restart_resume_mid_epoch_and_match_a_two_node_job(tmp_path):
    config = tiny_config_with(tmp_path, SELF_KILL)
    args = [config, *ARGS]
    # The reference: two "nodes" of one rank each, meeting through a c10d rendezvous on this machine.
    endpoint = f"127.0.0.1:{_free_port()}"
    node = ["--nnodes=2", "--nproc_per_node=1", "--rdzv-backend=c10d", f"--rdzv-endpoint={endpoint}", "--rdzv-id=t"]

    def node_run(k: int) -> subprocess.CompletedProcess:  # the launchers forked with torch imported (conftest)
        return run_torchrun(
            *args, "++model", str(tmp_path / "ref/m"), "++log", str(tmp_path / f"ref/log{k}"), torchrun_args=node
        )

    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        nodes = list(pool.map(node_run, range(2)))
    assert [p.returncode for p in nodes] == [0, 0], "\n".join(p.stdout + p.stderr for p in nodes)
    assert (tmp_path / "ref/m.002.pt").exists()
    # Rank 1 is SIGKILLed at epoch 1 step 3, the restarted rank 0 at epoch 2 step 2 (global step 7: epochs of 5 steps);
    # the agent restarts both times.
    kills = "{0: (1, 1, 3), 1: (0, 2, 7)}"
    restarts = ("--standalone", "--nproc_per_node=2", "--max-restarts=2")
    job = run_torchrun(*args, "++model", str(tmp_path / "job/m"), "++kills", kills, torchrun_args=restarts)
    out = job.stdout + job.stderr
    assert job.returncode == 0, out
    assert "attempt 0: rank 1 SIGKILLs itself" in out and "attempt 1: rank 0 SIGKILLs itself" in out, out
    starts = [line for line in job.stdout.splitlines() if line.startswith("task train, ")]
    assert len(starts) == 3, out  # the first attempt and two restarts
    interrupted = tmp_path / "job/m.interrupted.pt"
    # Each restart continues from the newest mid-epoch checkpoint before its kill (every 2 steps).
    assert f"Resuming from {interrupted}: epoch 1, global step 2." in out
    assert f"Resuming from {interrupted}: epoch 2, global step 6." in out and "Continuing epoch 2 at step 1 " in out
    assert not interrupted.exists()  # the final epoch checkpoint superseded it
    reference, resumed = (torch.load(tmp_path / f"{d}/m.002.pt", weights_only=True) for d in ("ref", "job"))
    assert checkpoint_differences(reference, resumed) == []  # every entry, the mid-epoch resumed epochs' scores too
