"""FSDP2 (torch_distributed = {"fsdp": {...}}): validated options, DDP's loss, checkpoints any rank count resumes."""

import os
import shutil

import pytest
import torch
from test_distributed import torchrun

from conftest import ROOT, run_rnn, run_script, tiny_config_with
from framework.base.errors import ConfigError
from framework.training import fsdp

# Blocks in a ModuleList (the default units of sharding) and no dropout: DDP, FSDP and one process with the
# ranks' batches together compute the same thing. Rank 1's loss turns NaN at global step `nan_at_step`.
BLOCKS = (
    "\nimport torch.distributed as _dist\n"
    "nan_at_step = -1\n"
    "class _Net(nn.Module):\n"
    "    def __init__(self):\n"
    "        super().__init__()\n"
    "        self.inp, self.out = nn.Linear(4, 16), nn.Linear(16, 3)\n"
    "        self.blocks = nn.ModuleList(nn.Sequential(nn.Linear(16, 16), nn.Tanh()) for _ in range(3))\n"
    "    def forward(self, x):\n"
    "        h = self.inp(x)\n"
    "        for block in self.blocks:\n"
    "            h = h + block(h)\n"
    "        return self.out(h)\n"
    "def get_model(**_kwargs):\n"
    "    return _Net()\n"
    "_train_step = train_step\n"
    "def train_step(*, model, extern_data, run_ctx, **kwargs):\n"
    "    _train_step(model=model, extern_data=extern_data, run_ctx=run_ctx, **kwargs)\n"
    "    if _dist.is_initialized() and _dist.get_rank() == 1 and run_ctx.step == nan_at_step:\n"
    "        run_ctx.losses['ce'].loss = run_ctx.losses['ce'].loss * float('nan')\n"
)
FSDP = "{'fsdp': {}}"


def test_fsdp_options_are_validated_with_the_allowed_ones_named():
    cpu = torch.device("cpu")
    options = fsdp.fully_shard_options({"mp_policy": {"param_dtype": "bfloat16"}, "shard_modules": ["x"]}, cpu)
    assert options["mp_policy"].param_dtype == torch.bfloat16 and options["reshard_after_forward"] is True
    for bad, says in [
        ({"reshard_after_forwards": False}, "unknown entries ['reshard_after_forwards']"),
        ({"mp_policy": {"param_dtype": "bfloat17"}}, "mp_policy['param_dtype'] must be a floating dtype"),
        ({"reshard_after_forward": "yes"}, "reshard_after_forward must be True, False or an int"),
        ({"offload_policy": "cpu"}, "this run trains on the CPU already"),
    ]:
        with pytest.raises(ConfigError, match="Allowed entries \\(fully_shard's options\\): shard_modules") as error:
            fsdp.fully_shard_options(bad, cpu)
        assert says in str(error.value)
    with pytest.raises(ConfigError, match="'param_sync_step' averages full replicas"):
        fsdp.refuse_ddp_options({"fsdp": {}, "param_sync_step": 4})


def test_shard_units_default_to_the_blocks_of_module_lists_and_a_pattern_must_match():
    model = torch.nn.Sequential(
        torch.nn.Linear(2, 2), torch.nn.ModuleList([torch.nn.Sequential(torch.nn.Linear(2, 2)) for _ in range(2)])
    )
    assert fsdp.shard_units(model, None) == ["1.0", "1.1"]
    assert fsdp.shard_units(model, ["Linear"]) == ["0", "1.0.0", "1.1.0"]
    assert fsdp.shard_units(model, ["1.*"]) == ["1.0", "1.0.0", "1.1", "1.1.0"]
    with pytest.raises(ConfigError, match=r"\['layers\.\*'\] match no module path or class name"):
        fsdp.shard_units(model, ["layers.*"])


def test_a_bad_fsdp_option_is_a_config_error_before_training(tmp_path):
    env = {**os.environ, "RANK": "0", "WORLD_SIZE": "1"}  # as torchrun sets them; no process group is made
    spec = "{'fsdp': {'mp_policy': 'bf16'}}"
    result = run_script(
        os.path.join(ROOT, "rnn.py"), tiny_config_with(tmp_path, ""), "++torch_distributed", spec, env=env
    )
    assert result.returncode == 2 and "torch_distributed['fsdp']: mp_policy must be a dict" in result.stderr


def _scores(stdout: str) -> list[str]:
    """The train and evaluation scores of each epoch, without timings."""
    lines = [
        line
        for line in stdout.splitlines()
        if line.startswith("Epoch ") and (" train: " in line or " evaluation: " in line)
    ]
    return [line.split(", 10 steps")[0] for line in lines]


@pytest.mark.slow
def test_fsdp_trains_as_ddp_its_checkpoints_resume_at_any_rank_count_and_a_nan_stops_it(tmp_path):
    config = tiny_config_with(tmp_path, BLOCKS)
    ddp_dir, fsdp_dir = tmp_path / "ddp", tmp_path / "fsdp"

    def two_ranks(directory, *args, sync=FSDP):
        return torchrun(config, "++batch_size", "8", "++model", str(directory / "m"), "++log", str(directory / "log"),
                        *args, sync=sync)  # fmt: skip

    ddp = two_ranks(ddp_dir, "++num_epochs", "4", sync="{}")
    assert ddp.returncode == 0, ddp.stdout + ddp.stderr
    sharded = two_ranks(fsdp_dir)
    assert sharded.returncode == 0, sharded.stdout + sharded.stderr
    # The same losses as DDP, epoch by epoch, and bitwise the same parameters and optimizer state.
    assert len(_scores(sharded.stdout)) == 4 and _scores(sharded.stdout) == _scores(ddp.stdout)[:4]
    a, b = torch.load(fsdp_dir / "m.002.pt"), torch.load(ddp_dir / "m.002.pt")
    assert all(torch.equal(a["model"][k], b["model"][k]) for k in b["model"])
    assert all(
        torch.equal(a["optimizer"]["state"][i][k], b["optimizer"]["state"][i][k]) for i in b["optimizer"]["state"]
        for k in b["optimizer"]["state"][i]
    )  # fmt: skip
    # Quiet with the default diagnostics; the checks that would copy the sharded model say why they do not run.
    logs = sharded.stdout + sharded.stderr + (fsdp_dir / "log.rank1").read_text()
    assert "WARNING" not in logs and "ERROR" not in logs and "Traceback" not in logs
    assert "could not check: every first-step check: RuntimeError: FSDP shards the model" in sharded.stdout
    assert "FSDP: 3 unit(s) (blocks.0, blocks.1, blocks.2) and the root, sharded over 2 ranks." in sharded.stdout
    assert sorted(os.listdir(fsdp_dir)) == [
        "findings.jsonl",
        "log",
        "log.rank1",
        "m.001.pt",
        "m.002.pt",
        "metrics.jsonl",
    ]
    # One process (the two ranks' batches in one) continues the two ranks' checkpoint; two ranks continue its.
    one = run_rnn(config, "++batch_size", "16", "++model", str(fsdp_dir / "m"), "++num_epochs", "3")
    assert one.returncode == 0 and "Resuming from" in one.stdout and "Epoch 3 train" in one.stdout, one.stderr
    again = two_ranks(fsdp_dir, "++num_epochs", "4")
    assert again.returncode == 0 and f"Resuming from {fsdp_dir / 'm.003.pt'}" in again.stdout, again.stderr
    a, b = torch.load(fsdp_dir / "m.004.pt")["model"], torch.load(ddp_dir / "m.004.pt")["model"]
    assert all(torch.allclose(a[k], b[k], atol=1e-6) for k in b)  # float rounding of one process's epoch 3
    # A NaN loss on rank 1 stops every rank before the update, with the step named (no replay: sharded).
    shutil.rmtree(fsdp_dir)
    nan = two_ranks(fsdp_dir, "++nan_at_step", "3", "++num_epochs", "1")
    out = nan.stdout + nan.stderr
    assert nan.returncode != 0
    assert "ERROR: Non-finite values on rank 1 in training step 3 of epoch 1 (global step 3). Stopped before" in out
    assert "not replayed: FSDP shards the model" in out and "non-finite losses: ce = nan" in out
