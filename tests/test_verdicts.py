"""Verdict runs and the determinism check, through real rnn.py / tool subprocesses."""

import os

import pytest

from conftest import ROOT, TINY_CONFIG, run_rnn, run_script, tiny_config_with

DETACHED_LOSS = (
    "\ndef train_step(*, model, extern_data, run_ctx, **_kwargs):\n"
    "    logits = model(extern_data['data'])\n"
    "    # the classic 'fix' for 'element 0 of tensors does not require grad': nothing trains any more\n"
    "    loss = nn.functional.cross_entropy(logits, extern_data['classes']).detach().requires_grad_()\n"
    "    run_ctx.mark_as_loss(name='ce', loss=loss)\n"
)


def test_overfit_batches_says_a_working_mlp_learns_and_writes_no_checkpoint(tmp_path):
    result = run_rnn(TINY_CONFIG, "++debug_overfit_batches", "2", "++model", str(tmp_path / "model"))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "training 300 steps on the first 2 batch(es) of GaussianClustersDataset (32 sequences)" in result.stdout
    assert (
        "debug_overfit_batches verdict: the model LEARNS: the loss on the first 2 batch(es) (eval mode) went from"
        in result.stdout
    )
    assert "Training loss curve: " in result.stdout and "step 299: " in result.stdout
    assert os.listdir(tmp_path) == []


def test_overfit_batches_says_a_detached_loss_does_not_learn(tmp_path):
    result = run_rnn(tiny_config_with(tmp_path, DETACHED_LOSS), "++debug_overfit_batches", "1")
    assert result.returncode == 1
    assert "debug_overfit_batches verdict: the model does NOT learn" in result.stderr
    assert "What the checks found: No parameter received a gradient" in result.stderr


def test_synthetic_data_tells_a_data_problem_from_a_model_bug(tmp_path):
    shuffled_labels = (
        "\ntrain = {'class': 'GaussianClustersDataset', 'split': 'train', 'num_seqs': 400, 'dim': 4, "
        "'num_classes': 3, 'separation': 0.0}\n"  # the real data carries no information about the class
        "num_epochs = 4\n"
    )
    config = tiny_config_with(tmp_path, shuffled_labels)
    result = run_rnn(config, "++debug_synthetic_data", "True")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "debug_synthetic_data: 320 synthetic training sequences: inputs data; targets classes" in result.stdout
    assert "debug_synthetic_data verdict: the model LEARNS the synthetic data" in result.stdout
    assert "look at the data" in result.stdout
    result = run_rnn(tiny_config_with(tmp_path, shuffled_labels + DETACHED_LOSS), "++debug_synthetic_data", "True")
    assert result.returncode == 1
    assert "debug_synthetic_data verdict: the model does NOT learn even synthetic data" in result.stderr
    assert "Look at the model, the loss and the optimization, not at the data" in result.stderr


def _check_determinism(*args, fresh_runs: bool = True):
    # The tool's own process is forked from the preloaded server; the two rnn.py runs it compares stay fresh
    # interpreters (fresh_runs): the tool is about two independent processes (hash seeds, import order).
    return run_script(os.path.join(ROOT, "tools", "check-determinism.py"), *args, fresh_runs=fresh_runs)


@pytest.mark.slow
def test_check_determinism_passes_a_seeded_config_and_names_an_unseeded_module(tmp_path):
    result = _check_determinism(TINY_CONFIG, "--steps", "3")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Deterministic: 3 steps agree bit for bit" in result.stdout
    unseeded = (
        "\nimport os, torch\n"
        "class Jitter(nn.Module):\n"
        "    def forward(self, x):\n"
        "        generator = torch.Generator().manual_seed(int.from_bytes(os.urandom(4), 'little'))\n"
        "        return x + 0.01 * torch.randn(x.shape, generator=generator)\n"
        "def get_model(**_kwargs):\n"
        "    return nn.Sequential(nn.Linear(4, hidden), nn.ReLU(), Jitter(), nn.Linear(hidden, 3))\n"
    )
    # Runs forked from the tool (fresh_runs False) differ here as fresh ones do: the module draws its seed from
    # os.urandom in each run; that a seeded config agrees across independent interpreters is the fresh case above.
    config = tiny_config_with(tmp_path, unseeded)
    result = _check_determinism(config, "++model", str(tmp_path / "m"), "--steps", "2", fresh_runs=False)
    assert result.returncode == 1, result.stdout + result.stderr
    assert result.stdout.startswith("First difference at step 0: module output '2' (Jitter).")
    assert "run 1: [16, 8] float32" in result.stdout and "an unseeded random op" in result.stdout
    assert os.listdir(tmp_path) == ["config.py"]  # no checkpoints although the command line names a model
