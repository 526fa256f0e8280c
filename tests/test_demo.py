"""The shipped example configs run as they are and learn what they should."""

import os
import re

import pytest

from conftest import ROOT, run_rnn
from framework.base.log import TIME_PREFIX

pytestmark = pytest.mark.slow  # real training runs and processes, seconds each


def _last_dev_score(stdout: str, name: str) -> float:
    matches = re.findall(rf"^Epoch \d+ evaluation: dev: .*\b{name} (\S+)", stdout, re.MULTILINE)
    assert matches, stdout
    return float(matches[-1])


def test_mnist_demo_reaches_a_dev_error_rate_below_10_percent(tmp_path):
    result = run_rnn(os.path.join(ROOT, "configs", "mnist_mlp.py"), cwd=str(tmp_path))
    assert result.returncode == 0, result.stderr
    assert _last_dev_score(result.stdout, "fer") < 0.10
    assert os.path.exists(tmp_path / "output" / "mnist_mlp" / "model.010.pt")
    log = (tmp_path / "output" / "mnist_mlp" / "train.log").read_text()
    assert re.sub(TIME_PREFIX, "", log, flags=re.MULTILINE) == result.stdout  # each line after its wall-clock time


def test_12ax_lstm_learns_the_task(tmp_path):
    result = run_rnn(os.path.join(ROOT, "configs", "task12ax_lstm.py"), "++num_epochs", "6", cwd=str(tmp_path))
    assert result.returncode == 0, result.stderr
    assert _last_dev_score(result.stdout, "fer") < 0.02


def test_synthetic_regression_fits_the_sine(tmp_path):
    result = run_rnn(os.path.join(ROOT, "configs", "synthetic_regression.py"), "++num_epochs", "15", cwd=str(tmp_path))
    assert result.returncode == 0, result.stderr
    assert _last_dev_score(result.stdout, "mse") < 0.01  # the targets' variance is about 0.5


def _small_text_overrides(train_chars: int, dev_chars: int) -> list[str]:
    train = {"class": "CharTextDataset", "split": "train", "seq_len": 64, "max_chars": train_chars}
    dev = {"class": "CharTextDataset", "split": "dev", "seq_len": 64, "max_chars": dev_chars}
    return ["++train", repr(train), "++dev", repr(dev), "++warmup_steps", "1"]


def test_char_transformer_learns_python_source_quietly(tmp_path):
    # 4 epochs of 8 steps on 33 KB of code: the dev loss must fall well below ln(256) = 5.55 (uniform
    # guessing), and a healthy run prints no WARNING, though the dev error rate can rise early on
    # while the dev loss falls. The shipped run's 1.55 takes 3 minutes: a benchmark, not a test.
    result = run_rnn(
        os.path.join(ROOT, "configs", "char_transformer.py"),
        *_small_text_overrides(train_chars=64 * 65 * 8, dev_chars=8192),
        "++num_epochs",
        "4",
        cwd=str(tmp_path),
    )
    assert result.returncode == 0, result.stderr
    assert "WARNING" not in result.stdout + result.stderr
    assert _last_dev_score(result.stdout, "ce") < 3.6
    assert os.path.exists(tmp_path / "output" / "char_transformer" / "model.004.pt")


def test_char_transformer_trains_under_bfloat16_autocast(tmp_path):
    from framework.core.autocast import native_bfloat16

    result = run_rnn(
        os.path.join(ROOT, "configs", "char_transformer.py"),
        *_small_text_overrides(train_chars=64 * 65 * 2, dev_chars=2048),
        "++num_epochs",
        "1",
        "++torch_amp",
        "'bfloat16'",
        cwd=str(tmp_path),
    )
    assert result.returncode == 0, result.stderr
    assert _last_dev_score(result.stdout, "ce") < 5.6
    # Emulated bfloat16 is a slowdown the user should hear about; native bfloat16 is not.
    assert ("bfloat16 matrix multiplications are emulated" in result.stdout) != native_bfloat16("cpu")
