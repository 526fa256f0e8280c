"""The shipped example configs run as they are and learn what they should."""

import os
import re

from conftest import ROOT, run_rnn


def _last_dev_score(stdout: str, name: str) -> float:
    matches = re.findall(rf"^Epoch \d+ evaluation: dev: .*\b{name} (\S+)", stdout, re.MULTILINE)
    assert matches, stdout
    return float(matches[-1])


def test_mnist_demo_reaches_a_dev_error_rate_below_10_percent(tmp_path):
    result = run_rnn(os.path.join(ROOT, "configs", "mnist_mlp.py"), cwd=str(tmp_path))
    assert result.returncode == 0, result.stderr
    assert _last_dev_score(result.stdout, "fer") < 0.10
    assert os.path.exists(tmp_path / "output" / "mnist_mlp" / "model.010.pt")
    assert (tmp_path / "output" / "mnist_mlp" / "train.log").read_text() == result.stdout


def test_12ax_lstm_learns_the_task(tmp_path):
    result = run_rnn(os.path.join(ROOT, "configs", "task12ax_lstm.py"), "++num_epochs", "6", cwd=str(tmp_path))
    assert result.returncode == 0, result.stderr
    assert _last_dev_score(result.stdout, "fer") < 0.02


def test_synthetic_regression_fits_the_sine(tmp_path):
    result = run_rnn(os.path.join(ROOT, "configs", "synthetic_regression.py"), "++num_epochs", "15", cwd=str(tmp_path))
    assert result.returncode == 0, result.stderr
    assert _last_dev_score(result.stdout, "mse") < 0.01  # the targets' variance is about 0.5
