"""torchrun with 2 CPU processes (gloo): same results as one process, and failures that end every rank."""

import ast
import os
import re
import shutil
import signal
import subprocess
import sys

import numpy as np
import psutil
import pytest
import torch

from conftest import ROOT, run_rnn, run_torchrun, start_torchrun, tiny_config_with
from framework.testing import checkpoint_differences

pytestmark = pytest.mark.slow  # real training runs and processes, seconds each

# No dropout: two ranks and one process then compute the same thing.
PLAIN_SGD = (
    "\noptimizer = {'class': 'sgd'}\n"
    "learning_rate = 0.1\n"
    "def get_model(**_kwargs):\n"
    "    return nn.Sequential(nn.Linear(4, hidden), nn.ReLU(), nn.Linear(hidden, 3))\n"
)


def torchrun(*args, timeout=120, sync="{}"):
    """``torchrun --nproc_per_node=2 --standalone rnn.py ARGS``, its ranks forked with torch imported (conftest)."""
    return run_torchrun(*args, "++torch_distributed", sync, timeout=timeout)


def torchrun_command(*args, timeout=120, sync="{}"):
    """The same as a ``python -m torch.distributed.run`` process: for how a job with a failed rank ends (what its
    workers print as they are ended, the root cause its summary names), which the forked launcher does its own way."""
    command = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node=2", "--standalone"]
    return subprocess.run(
        # no report.html (a process at the run's end, which rank 0 waits for), as run_torchrun's jobs
        [*command, os.path.join(ROOT, "rnn.py"), *args, "++torch_distributed", sync, "++report_html", "False"],
        capture_output=True,
        text=True,
        timeout=timeout,
        stdin=subprocess.DEVNULL,
    )


@pytest.fixture(scope="module")
def two_ranks(tmp_path_factory):
    """One 2-rank run of the plain SGD config (batch 8 per rank, 2 epochs): (config, its model directory)."""
    directory = tmp_path_factory.mktemp("two_ranks")
    config = tiny_config_with(directory, PLAIN_SGD)
    two = torchrun(
        config, "++batch_size", "8", "++model", str(directory / "two/m"), "++log", str(directory / "two/log")
    )
    assert two.returncode == 0, two.stdout + two.stderr
    return config, two, directory / "two"


@pytest.fixture(scope="module")
def one_process(two_ranks):
    """The same config in one process with the two ranks' batches in one (batch 16): (its run, its model directory)."""
    config, _, two_dir = two_ranks
    one = run_rnn(config, "++batch_size", "16", "++model", str(two_dir.parent / "one/m"))
    assert one.returncode == 0, one.stderr
    return one, two_dir.parent / "one"


def test_two_ranks_match_one_process_with_twice_the_batch_and_one_rank_resumes(tmp_path, two_ranks, one_process):
    config, two, two_dir = two_ranks
    one, one_dir = one_process
    final = [line for line in two.stdout.splitlines() if line.startswith("Epoch 2 evaluation")]
    assert final and final == [line for line in one.stdout.splitlines() if line.startswith("Epoch 2 evaluation")]
    a, b = torch.load(two_dir / "m.002.pt")["model"], torch.load(one_dir / "m.002.pt")["model"]
    assert all(torch.allclose(a[k], b[k], atol=1e-6) for k in a)
    assert sorted(os.listdir(two_dir)) == [  # rank 0 writes
        "findings.jsonl",
        "log",
        "log.rank1",
        "m.001.pt",
        "m.002.pt",
        "metrics.jsonl",
    ]
    assert "Epoch 2 train" in (two_dir / "log.rank1").read_text()
    shutil.copytree(two_dir, tmp_path / "two")  # the module's run stays as it is for the other tests
    resumed = run_rnn(config, "++batch_size", "16", "++model", str(tmp_path / "two/m"), "++num_epochs", "3")
    assert resumed.returncode == 0 and "Resuming from" in resumed.stdout and "Epoch 3 train" in resumed.stdout


def test_nan_on_rank_1_stops_both_ranks_at_the_same_step_with_the_report_of_rank_1(tmp_path):
    nan_on_rank_1 = (
        "\nimport torch.distributed as _dist\n"
        "_train_step = train_step\n"
        "def train_step(*, model, extern_data, run_ctx, **kwargs):\n"
        "    _train_step(model=model, extern_data=extern_data, run_ctx=run_ctx, **kwargs)\n"
        "    if _dist.get_rank() == 1 and run_ctx.step == 3:\n"
        "        run_ctx.losses['ce'].loss = run_ctx.losses['ce'].loss * float('nan')\n"
    )
    # The torchrun command: its summary's root cause (the first failed exit) is asserted below.
    result = torchrun_command(tiny_config_with(tmp_path, PLAIN_SGD + nan_on_rank_1), "++batch_size", "8")
    assert result.returncode != 0
    out = result.stdout + result.stderr
    assert "ERROR: Non-finite values on rank 1 in training step 3 of epoch 1 (global step 3). Stopped before" in out
    assert "non-finite losses: ce = nan" in out
    assert "ERROR: Non-finite values on rank 1 in training step 3 of epoch 1 (global step 3): all ranks stopped" in out


def test_an_exception_on_one_rank_ends_the_job_promptly_with_its_traceback(tmp_path):
    boom_on_rank_1 = (
        "\nimport torch.distributed as _dist\n"
        "_train_step = train_step\n"
        "def train_step(*, model, extern_data, run_ctx, **kwargs):\n"
        "    if _dist.get_rank() == 1 and run_ctx.step == 2:\n"
        "        raise RuntimeError('boom on rank 1')\n"
        "    _train_step(model=model, extern_data=extern_data, run_ctx=run_ctx, **kwargs)\n"
    )
    # The torchrun command: how its agent ends the other rank and what reaches its output, as users get them.
    result = torchrun_command(tiny_config_with(tmp_path, PLAIN_SGD + boom_on_rank_1), "++batch_size", "8", timeout=60)
    assert result.returncode != 0
    out = result.stdout + result.stderr
    assert "[rank1]: RuntimeError: boom on rank 1" in out and "rank      : 1 (local_rank: 1)" in out


def test_the_process_group_is_destroyed_by_the_exit_handlers_not_by_the_models_release(tmp_path):
    # A gloo thread that frees the last reference to a tensor of a collective takes the GIL. If the DDP wrapper's
    # reducer held the group's last reference, the wrapper's release as the task returns would destroy the group
    # with the GIL held, waiting for that thread: the rank hung after its summary (CI, about 1 run in 30 on a busy
    # machine). The group must outlive the model and go in the exit handlers, through references that let go of the
    # GIL. Seen from the config: gloo's threads counted by an exit handler that runs before the framework's (added
    # during training) and by one that runs after it (added as the config loads).
    exit_handlers = (
        "\nimport atexit as _atexit, os as _os\n"
        "def _gloo_threads(when):\n"
        "    if _os.environ['RANK'] != '0':\n"
        "        return\n"
        "    names = [open(f'/proc/self/task/{t}/comm').read().strip() for t in _os.listdir('/proc/self/task')]\n"
        "    print(f'gloo threads {when}:', names.count('pt_gloo_runloop'), flush=True)\n"
        "_atexit.register(_gloo_threads, 'after the exit handlers')\n"
        "_train_step = train_step\n"
        "def train_step(*, model, extern_data, run_ctx, **kwargs):\n"
        "    _train_step(model=model, extern_data=extern_data, run_ctx=run_ctx, **kwargs)\n"
        "    if run_ctx.epoch == 1 and run_ctx.step == 1:\n"
        "        _atexit.register(_gloo_threads, 'once the task returned')\n"
    )
    config = tiny_config_with(tmp_path, PLAIN_SGD + exit_handlers)
    result = torchrun(config, "++num_epochs", "1", "++model", str(tmp_path / "m"))
    assert result.returncode == 0, result.stdout + result.stderr
    counts = re.findall(r"gloo threads (.*): (\d+)", result.stdout)
    assert counts == [("once the task returned", "2"), ("after the exit handlers", "0")], result.stdout


def test_torch_distributed_without_torchrun_is_a_config_error(tmp_path):
    result = run_rnn(tiny_config_with(tmp_path, "\ntorch_distributed = {}\n"))
    assert result.returncode == 2 and "was not started by torchrun" in result.stderr


def test_parameter_averaging_every_step_matches_one_process(tmp_path, two_ranks, one_process):
    config, one_dir = two_ranks[0], one_process[1]  # the same config and its one-process run
    averaged = torchrun(config, "++batch_size", "8", "++model", str(tmp_path / "avg/m"), sync="{'param_sync_step': 1}")
    assert averaged.returncode == 0, averaged.stdout + averaged.stderr
    a, b = torch.load(tmp_path / "avg/m.002.pt")["model"], torch.load(one_dir / "m.002.pt")["model"]
    assert all(torch.allclose(a[k], b[k], atol=1e-6) for k in a)  # SGD: averaging updates = averaging gradients


def test_unused_parameters_are_named_by_rank(tmp_path):
    unused_layer = (
        "\nclass _Net(nn.Module):\n"
        "    def __init__(self):\n"
        "        super().__init__()\n"
        "        self.body, self.unused, self.head = nn.Linear(4, 8), nn.Linear(8, 8), nn.Linear(8, 3)\n"
        "    def forward(self, x):\n"
        "        return self.head(self.body(x).relu())\n"
        "def get_model(**_kwargs):\n"
        "    return _Net()\n"
    )
    result = torchrun(tiny_config_with(tmp_path, unused_layer), "++batch_size", "8", timeout=60)
    assert result.returncode != 0
    assert "[framework] parameters that got no gradient on rank 1: unused.weight, unused.bias." in result.stderr


def test_sigusr1_dumps_the_stacks_of_every_rank_labelled_by_rank(tmp_path):
    # Each rank waits at step 1 until the test has sent the signals: both are alive inside training when they arrive.
    wait_at_step_1 = (
        "\nimport os as _os, time as _time\n"
        "_train_step = train_step\n"
        "def train_step(*, run_ctx, **kwargs):\n"
        "    while run_ctx.step == 1 and not _os.path.exists(_signalled):\n"
        "        _time.sleep(0.01)\n"
        "    _train_step(run_ctx=run_ctx, **kwargs)\n"
    )
    signalled = tmp_path / "signalled"
    config = tiny_config_with(tmp_path, f"_signalled = {str(signalled)!r}\n" + wait_at_step_1)
    job = start_torchrun(config, "++torch_distributed", "{}", "++num_epochs", "1", "++log_verbosity", "5")
    lines: list[str] = []
    try:
        for line in job.stdout:  # rank 0's step lines: both ranks are past startup, inside training
            lines.append(line)
            if "ep 1 train, step 0," in line:
                break
        workers = psutil.Process(job.pid).children()  # torchrun's workers (forked, or ``python -u rnn.py``)
        assert len(workers) == 2, "".join(lines)
        for worker in workers:
            worker.send_signal(signal.SIGUSR1)
        signalled.touch()
        rest, err = job.communicate(timeout=90)
        out = "".join(lines) + rest + err
    finally:
        signalled.touch()  # also when the test failed: the ranks must not wait for ever
        job.kill()
    assert job.returncode == 0, out  # training goes on after the dump
    for rank in (0, 1):
        assert f"[rank {rank}] Current thread" in out and f"[rank {rank}]   File " in out


def test_a_requeue_signal_to_one_rank_stops_every_rank_at_one_step_requeues_once_and_the_rerun_ends_equal(
    tmp_path, two_ranks
):
    # The requeue signal reaches rank 1 alone (a node's scheduler, a user's kill): stopping on its own, rank 1 would
    # leave rank 0 waiting in the next step's gradient all-reduce. Both must stop at one step, with one checkpoint,
    # and rank 0 (which holds the requeue command but got no signal) must requeue the job, once.
    usr2_on_rank_1 = (
        "\nimport os as _os, signal as _signal, torch.distributed as _dist\n"
        "_train_step = train_step\n"
        "def train_step(*, model, extern_data, run_ctx, **kwargs):\n"
        "    if _dist.get_rank() == 1 and run_ctx.step == 3 and not _os.path.exists(_requeues):\n"
        "        _os.kill(_os.getpid(), _signal.SIGUSR2)\n"
        "    _train_step(model=model, extern_data=extern_data, run_ctx=run_ctx, **kwargs)\n"
    )
    requeues = str(tmp_path / "requeues")
    config = tiny_config_with(tmp_path, PLAIN_SGD + f"_requeues = {requeues!r}\n" + usr2_on_rank_1)
    requeue = ["++requeue_signal", "'SIGUSR2'", "++requeue_command", repr(["sh", "-c", f"echo requeued >> {requeues}"])]
    args = [config, "++batch_size", "8", "++model", str(tmp_path / "m"), *requeue]
    stopped = torchrun(*args, "++log", str(tmp_path / "log"))
    assert stopped.returncode != 0, stopped.stdout + stopped.stderr
    logs = [(tmp_path / name).read_text() for name in ("log", "log.rank1")]
    # The first line of each log (the run summary at its end says it again).
    steps = [re.findall(r"Training stopped on request \((.*?)\) after epoch 1 step (\d+)", log)[:1] for log in logs]
    expected = [[("a requeue asked of another rank", "4")], [("SIGUSR2, requeue_signal", "4")]]
    assert steps == expected, logs  # flags read an update later
    assert os.path.exists(tmp_path / "m.interrupted.pt")
    with open(requeues) as f:
        assert f.read() == "requeued\n"  # once, by rank 0
    resumed = torchrun(*args, "++num_epochs", "2")
    assert resumed.returncode == 0 and "Continuing epoch 1 at step 5" in resumed.stdout, resumed.stdout + resumed.stderr
    # Every entry, the scores of the resumed epoch (summed over both ranks) included, equals the uninterrupted run's.
    a, b = (torch.load(directory / "m.002.pt", weights_only=True) for directory in (tmp_path, two_ranks[2]))
    assert checkpoint_differences(a, b) == []


# A RETURNN config whose train step writes the ids of its batch's sequences (each sequence's features are its id).
SHARDED_RETURNN = """
import os

import torch

backend = "torch"
device = "cpu"
torch_distributed = {"dataset_distribution": "shard"}
train = {"class": "HDFDataset", "files": [FILE], "seq_ordering": "sorted"}
batch_size = 1000
max_seqs = 2
extern_data = {"data": {"dim": 3}}
num_epochs = 1
optimizer = {"class": "sgd"}
learning_rate = 0.1


def get_model(**_kwargs):
    return torch.nn.Linear(3, 2)


def train_step(*, model, extern_data, **_kwargs):
    from framework import get_run_ctx

    x = extern_data["data"]
    with open(f"ids.rank{os.environ['RANK']}", "a") as f:  # a file: the framework's checks hold back a step's output
        f.write(f"{sorted(x[:, 0, 0].round().long().tolist())}\\n")
    get_run_ctx().mark_as_loss(name="ce", loss=model(x).pow(2).mean())
"""


def test_returnns_shard_distribution_trains_every_sequence_with_equal_steps_per_rank(tmp_path):
    """torch_distributed dataset_distribution 'shard' (RETURNN's): each rank batches its shard of the epoch's order
    (5 and 4 of 9 sequences, 2 per batch: 3 and 2 batches). RETURNN ends the epoch when the first rank runs out,
    leaving out rank 0's last sequence; here every rank takes 2 steps and then one more with the sequences of the
    batches cut off (1 sequence, trained on both ranks): every sequence is trained, and the ranks stay in step."""
    from returnn.datasets.hdf import SimpleHDFWriter

    path = tmp_path / "ids.hdf"
    writer = SimpleHDFWriter(str(path), dim=3, ndim=2)
    for i in range(1, 10):
        writer.insert_batch(np.full((1, 1 + i % 4, 3), i, np.float32), seq_len=[1 + i % 4], seq_tag=[f"s{i}"])
    writer.close()
    config = tmp_path / "sharded.config"
    config.write_text(SHARDED_RETURNN.replace("FILE", repr(str(path))))
    result = run_torchrun(str(config), "++model", "None", cwd=str(tmp_path), timeout=120)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    # each rank's distinct batches; the framework's checks also run steps on a batch of one sequence twice
    steps = [
        {ids for ids in map(tuple, map(ast.literal_eval, (tmp_path / f"ids.rank{r}").read_text().splitlines()))}
        for r in (0, 1)
    ]
    real = [{ids for ids in batches if len(set(ids)) == len(ids)} for batches in steps]
    assert real == [{(4, 8), (1, 5), (9,)}, {(2, 6), (3, 7), (9,)}], steps  # "sorted": 4 8 1 5 9 | 2 6 3 7
    assert "shared out over the ranks for one more step" in result.stdout + result.stderr
