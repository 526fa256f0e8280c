"""Replicas that disagree under torch.distributed: bugs as people write them, run with torchrun on 2 CPU ranks
(gloo) with default options, are stopped before a checkpoint with the parameter, the ranks and the cause;
their healthy twins stay quiet. The configs are tests/zoo/classify.py plus one tests/zoo/silent_ddp_*.py."""

import os
import re

import pytest
import torch

from conftest import ROOT, run_torchrun
from framework.debug.replicas import TOLERANCE, checksums, disagreement

ZOO = os.path.join(ROOT, "tests", "zoo")


def torchrun(tmp_path, *files, args=()):
    """``torchrun --nproc_per_node=2 --standalone rnn.py classify.py FILES``, checkpoints under tmp_path (its ranks
    forked with torch imported: conftest's run_torchrun)."""
    configs = [os.path.join(ZOO, f) for f in ("classify.py", *files)]
    return run_torchrun(*configs, "++model", str(tmp_path / "m"), *args)


BUGS = {
    "train_step calls model.module": (
        "silent_ddp_module.py",
        r"ERROR: The replicas of the model on the ranks differ before the first update of this process \(epoch 1, "
        r"step 0, global step 0\): the gradient of parameter '0\.weight' \(and 3 more of 4\) differs between ranks: "
        r"rank 1 has other values than rank 0; the largest difference of one entry is [\d.e-]+ .* Gradients were "
        r"never averaged across ranks: train_step did not call the model it was given \(DDP's forward\) but "
        r"model\.module\(\.\.\.\)",
    ),
    "a head swapped in after wrapping": (
        "silent_ddp_new_head.py",
        r"ERROR: The replicas .* before the first update .* the gradient of parameter '2\.weight' \(and 1 more of 4\) "
        r"differs .* the parameters '2\.weight', '2\.bias' were added to the model after DDP wrapped it",
    ),
    "a rank-dependent re-initialisation": (
        "silent_ddp_rank_seed.py",
        r"ERROR: The replicas .* before the first update .*: the parameter '2\.weight' \(and 1 more of 4\) differs "
        r"between ranks: rank 1 has other values than rank 0.* no update ran since, so code changed the parameters of "
        r"some ranks only: weights loaded or re-initialised on some ranks only",
    ),
    "an update skipped on one rank": (
        "silent_ddp_skip_on_one_rank.py",
        r"ERROR: The replicas .* differ at the end of epoch 1, before its checkpoint: the parameter '0\.weight' "
        r"\(and 3 more of 4\) differs .*\(the gradients were equal at the first update.* or an update skipped or a "
        r"parameter changed on some ranks only",
    ),
}


@pytest.mark.slow
@pytest.mark.parametrize("bug", BUGS)
def test_a_bug_stops_every_rank_before_the_first_checkpoint_with_the_parameter_ranks_and_cause(tmp_path, bug):
    config, expected = BUGS[bug]
    result = torchrun(tmp_path, config)
    assert result.returncode != 0 and re.search(expected, result.stderr), result.stdout + result.stderr
    assert "first in the" in result.stderr and "all ranks stop; rank 0 says why." in result.stderr  # rank 1
    assert not os.path.exists(tmp_path / "m.001.pt")


@pytest.mark.slow
def test_parameters_unfrozen_after_wrapping_are_caught_at_the_next_epochs_first_update(tmp_path):
    result = torchrun(tmp_path, "silent_ddp_unfreeze.py")
    expected = (
        r"ERROR: The replicas of the model on the ranks differ before update 101 \(epoch 2, step 0, global step 100\): "
        r"the gradient of parameter '0\.weight' \(and 1 more of 4\) differs .* the parameters '0\.weight', '0\.bias' "
        r"were frozen when DDP wrapped the model"
    )
    assert result.returncode != 0 and re.search(expected, result.stderr), result.stdout + result.stderr
    assert os.path.exists(tmp_path / "m.001.pt") and not os.path.exists(tmp_path / "m.002.pt")


@pytest.mark.slow
def test_the_same_bug_with_the_check_off_trains_to_the_end_with_diverged_replicas(tmp_path):
    result = torchrun(
        tmp_path, "silent_ddp_module.py", args=["++num_epochs", "1", "++debug_replica_check_interval", "0"]
    )
    assert result.returncode == 0 and os.path.exists(tmp_path / "m.001.pt"), result.stderr  # what users got


HEALTHY = {  # plain DDP is the base of the first: not run on its own (each torchrun costs seconds)
    "batch norm, a frozen layer, an expert some ranks skip": (["silent_ddp_healthy.py"], []),
    "parameter averaging": ([], ["++torch_distributed", "{'param_sync_step': 4}"]),
}


@pytest.mark.slow
@pytest.mark.parametrize("twin", HEALTHY)
def test_healthy_twins_are_compared_and_stay_quiet(tmp_path, twin):
    files, args = HEALTHY[twin]
    if not args:
        args = ["++torch_distributed", "{'find_unused_parameters': True}" if files else "{}"]
    result = torchrun(tmp_path, *files, args=[*args, "++num_epochs", "2", "++log_verbosity", "5"])
    out = result.stdout + result.stderr
    assert result.returncode == 0, out
    assert "WARNING" not in out and "ERROR" not in out
    checks = re.findall(r"Replica check (.*?)(?: \(epoch [^)]*\))?: \d+ parameters.* equal on all 2 ranks", out)
    at_end = [f"at the end of epoch {epoch}, before its checkpoint" for epoch in (1, 2)]
    first, periodic = "before the first update of this process", "after update 200 of this process"  # 100 per epoch
    assert checks == [first, at_end[0], periodic, at_end[1]], out


def test_checksums_tell_drift_from_rounding():
    """Entries that differ by float32 rounding (1e-7) stay below the tolerance, also all in one direction;
    parameters that drifted by one update (a relative 1e-2 in random directions) or by a shift of 1e-5 are
    above it; so is a gradient present on one rank only."""
    generator = torch.Generator().manual_seed(0)
    base = torch.randn(1000, 1000, generator=generator, dtype=torch.float64)
    for relative, noise, differs in [
        (0, 1, False),
        (1e-7, 1, False),
        (1e-7, 0, False),
        (1e-2, 1, True),
        (1e-5, 0, True),
    ]:
        other = base * (
            1 + relative * (noise * torch.randn(base.shape, generator=generator, dtype=base.dtype) + 1 - noise)
        )
        a, b = checksums([base.float()]), checksums([other.float()])
        score = disagreement(torch.minimum(a, b), torch.maximum(a, b), [base.numel()])
        assert bool(score > TOLERANCE) == differs, (relative, noise, float(score))
    a, b = checksums([None]), checksums([torch.zeros(3)])
    assert disagreement(torch.minimum(a, b), torch.maximum(a, b), [3]).item() == 1
