"""Checkpoints inside an epoch (checkpoint_every_n_steps / _minutes) and the preemption signal (requeue_signal)."""

import signal
import sys

import numpy as np
import pytest
import torch

from conftest import captured_log, run_rnn, tiny_config_with
from framework.base.errors import ConfigError
from framework.core.scores import rank_share
from framework.testing import bitwise_equal
from framework.training.distributed import Distributed
from framework.training.preemption import parse_signal

# The run SIGKILLs itself (or sends itself a signal) in the train_step of one global step: a real signal at a
# known step, so the checkpoint it resumes from is known too.
SIGNAL_AT_STEP = (
    "\nimport os as _os, signal as _signal\n"
    "signal_at_step = None\n"
    "signal_to_send = 'SIGKILL'\n"
    "_train_step = train_step\n"
    "def train_step(*, model, extern_data, run_ctx, **kwargs):\n"
    "    if run_ctx.step == signal_at_step:\n"
    "        _os.kill(_os.getpid(), getattr(_signal, signal_to_send))\n"
    "    _train_step(model=model, extern_data=extern_data, run_ctx=run_ctx, **kwargs)\n"
)


@pytest.mark.slow
def test_a_run_killed_mid_epoch_resumes_from_its_newest_mid_epoch_checkpoint_bit_for_bit(tmp_path):
    config = tiny_config_with(tmp_path, SIGNAL_AT_STEP)
    reference = run_rnn(config, "++model", str(tmp_path / "ref/m"))
    assert reference.returncode == 0, reference.stderr
    # A checkpoint after every step (the clock has always run out); 10 steps an epoch: killed in epoch 2's step 6.
    every_step = ["++model", str(tmp_path / "run/m"), "++checkpoint_every_n_minutes", "1e-9"]
    killed = run_rnn(config, *every_step, "++signal_at_step", "16")
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    assert sorted(p.name for p in (tmp_path / "run").iterdir() if p.suffix == ".pt") == ["m.001.pt", "m.interrupted.pt"]
    # Every step but an epoch's last (the epoch checkpoint follows it) wrote one.
    assert killed.stdout.count("Saved mid-epoch checkpoint") == 9 + 6
    resumed = run_rnn(config, *every_step)
    assert resumed.returncode == 0, resumed.stderr
    assert f"Resuming from {tmp_path / 'run/m.interrupted.pt'}: epoch 2, global step 16." in resumed.stdout
    assert "Continuing epoch 2 at step 6 of 10." in resumed.stdout
    assert not (tmp_path / "run/m.interrupted.pt").exists()  # the epoch checkpoint superseded it
    a, b = (torch.load(tmp_path / f"{d}/m.002.pt", weights_only=True) for d in ("ref", "run"))
    assert all(
        bitwise_equal(a[key], b[key]) for key in ("model", "optimizer", "plugins", "rng", "learning_rate_control")
    )


@pytest.mark.slow
def test_the_requeue_signal_checkpoints_then_runs_the_requeue_command_and_exits_130(tmp_path):
    # The requeue command records whether the checkpoint was complete when it ran, and its arguments.
    record = tmp_path / "requeued"
    command = [sys.executable, "-c", "import os, sys; open(sys.argv[1], 'w').write(repr(os.path.exists(sys.argv[2])))"]
    requeue = [*command, str(record), str(tmp_path / "m.interrupted.pt")]
    config = tiny_config_with(tmp_path, SIGNAL_AT_STEP + f"requeue_signal = 'SIGUSR2'\nrequeue_command = {requeue!r}\n")
    run = run_rnn(config, "++model", str(tmp_path / "m"), "++signal_at_step", "3", "++signal_to_send", "'SIGUSR2'")
    assert run.returncode == 130, run.stderr
    assert "SIGUSR2 (requeue_signal): writing a checkpoint after the current step, then requeueing." in run.stdout
    assert "Training stopped on request (SIGUSR2, requeue_signal) after epoch 1 step 3 (global step 4)." in run.stderr
    assert record.read_text() == "True"
    assert f"Requeued the job: {' '.join(requeue)}" in run.stdout
    resumed = run_rnn(config, "++model", str(tmp_path / "m"))
    assert resumed.returncode == 0 and "Continuing epoch 1 at step 4 of 10." in resumed.stdout, resumed.stderr


def test_a_requeue_signal_that_already_means_something_else_is_refused():
    assert parse_signal("USR2") == signal.SIGUSR2 == parse_signal(int(signal.SIGUSR2))
    for taken, why in (("SIGUSR1", "dumps every thread's stack"), ("SIGTERM", "already stops training")):
        with pytest.raises(ConfigError, match=f"{taken} cannot request a requeue, because it {why}"):
            parse_signal(taken)
    with pytest.raises(ConfigError, match="'SIGNOPE' is not a signal on this system"):
        parse_signal("SIGNOPE")


def test_periodic_checkpoints_without_a_model_prefix_are_a_config_error(tmp_path):
    result = run_rnn(tiny_config_with(tmp_path, "\ncheckpoint_every_n_steps = 5\n"))
    assert result.returncode == 2
    assert "checkpoint_every_n_steps is set, but 'model' is not, so there is nowhere to write" in result.stderr


def test_mid_epoch_score_sums_continue_per_rank_or_as_their_total_on_another_number_of_ranks():
    first, second = {"sums": {"ce": 3.0}, "weights": {"ce": 4}}, {"sums": {"ce": 5.0}, "weights": {"ce": 6}}
    saved = {"ranks": [first, second]}
    assert rank_share(saved, 1, 2) == (second, 2)  # as many ranks: each continues its own sums
    assert rank_share(saved, 0, 1) == ({"sums": {"ce": 8.0}, "weights": {"ce": 10}}, 2)  # one process: the total
    assert rank_share(saved, 2, 3) == ({"sums": {}, "weights": {}}, 2)  # more ranks: the total stays on rank 0
    assert rank_share(first, 0, 1) == (first, 1)  # a checkpoint of an older version: one process's sums


def test_batches_that_do_not_split_evenly_over_the_ranks_are_shared_out_and_said_once():
    ranks = Distributed.__new__(Distributed)  # its plan of the batches, without a process group
    ranks.size, ranks._remainder_said = 2, False
    plan = [np.arange(k * 4, k * 4 + 4) for k in range(5)]
    with captured_log(3) as lines:
        shares = []
        for rank in range(2):
            ranks.rank = rank
            shares.append([list(b) for b in ranks.train_plan(plan)])
    assert shares[1] == [[4, 5, 6, 7], [12, 13, 14, 15], [17, 19]]
    assert sorted(i for share in shares for batch in share for i in batch) == list(range(20))  # each sequence once
    assert len(shares[0]) == len(shares[1])  # every rank takes as many steps
    assert len(lines) == 1 and "the last 1 (4 sequences) are shared out over the ranks" in lines[0]
    assert "RETURNN instead gives each rank every N-th sequence" in lines[0]


def test_an_epoch_of_fewer_batches_than_ranks_trains_every_sequence():
    ranks = Distributed.__new__(Distributed)
    ranks.size, ranks._remainder_said = 4, False
    plan = [np.array([0, 1]), np.array([2])]  # 2 batches, 3 sequences, 4 ranks
    with captured_log(3) as lines:
        shares = []
        for rank in range(4):
            ranks.rank = rank
            shares.append([list(b) for b in ranks.train_plan(plan)])
    assert all(len(share) == 1 and share[0] for share in shares)
    assert {i for share in shares for i in share[0]} == {0, 1, 2}
    assert "(1 sequences trained twice, as every rank needs one)" in lines[0]
