"""The VAE demo (configs/vae_mnist.py) and the DTU exercise's bug classes planted in configs/vae_bugs/."""

import io
import math
import os

import numpy as np
import pytest
import torch
from PIL import Image
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from conftest import ROOT, run_rnn
from framework import testing

VAE = os.path.join(ROOT, "configs", "vae_mnist.py")
BUGS = os.path.join(ROOT, "configs", "vae_bugs")


@pytest.mark.slow  # seconds of work: the full suite runs it, the fast subset does not
def test_the_vae_writes_the_three_pictures_and_logs_them_to_tensorboard(tmp_path):
    result = run_rnn(VAE, "++num_epochs", "3", cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    out = tmp_path / "output" / "vae_mnist"
    pictures = {}
    for name in ("orig_data", "reconstructions", "generated_samples"):
        image = Image.open(out / f"{name}.png")
        assert image.size == (8 * 30 + 2, 8 * 30 + 2) and image.mode == "L"
        pictures[name] = np.asarray(image, dtype=np.float64) / 255

    # reconstructions resemble their originals, pixel by pixel, far more than samples from the prior do
    def similarity(name):
        return np.corrcoef(pictures[name].ravel(), pictures["orig_data"].ravel())[0, 1]

    assert similarity("reconstructions") > max(0.65, similarity("generated_samples") + 0.2)
    events = EventAccumulator(str(out / "tensorboard"), size_guidance={"images": 0})
    events.Reload()
    assert {"vae/orig_data", "vae/reconstructions", "vae/generated_samples"} <= set(events.Tags()["images"])
    for name, picture in pictures.items():  # the same pictures (the PNG files round, TensorBoard truncates as torch)
        (logged,) = events.Images(f"vae/{name}")
        pixels = np.asarray(Image.open(io.BytesIO(logged.encoded_image_string)).convert("L"), dtype=np.float64) / 255
        assert pixels.shape == picture.shape and np.abs(pixels - picture).max() <= 1 / 255 + 1e-9
    assert "Epoch 3 evaluation: dev: recon " in result.stdout and " kl " in result.stdout
    assert "Wrote orig_data.png, reconstructions.png, generated_samples.png to output/vae_mnist/" in result.stdout


@pytest.mark.slow  # seconds of real runs: the full suite runs it, the fast subset does not
def test_the_device_bug_is_found_on_a_cpu_by_the_layer_template(tmp_path):
    bug = os.path.join(BUGS, "device.py")
    result = run_rnn(VAE, bug, "++num_epochs", "1", "++debug_print_layer_output_template", "True", cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr  # on a CPU it trains, so it goes unnoticed
    line = 1 + open(bug).read().splitlines().index("        return mean + torch.exp(0.5 * log_var) * epsilon")
    assert f"DEVICE BUG in module encoder: aten.mul at {bug}:{line} in reparameterize" in result.stdout
    assert "mixes the model's tensors with a tensor on cpu [3, 20]" in result.stdout


@pytest.mark.slow  # the MNIST demo run to its first step: about 8 s of CPU
def test_the_shape_bug_names_the_layer_and_its_weight(tmp_path):
    result = run_rnn(VAE, os.path.join(BUGS, "shape.py"), cwd=tmp_path)
    assert result.returncode == 1
    assert "mat1 and mat2 shapes cannot be multiplied (100x400 and 20x784)" in result.stderr
    assert "module call path: (model) -> decoder -> decoder.out (Linear)" in result.stderr
    assert "parameters of decoder.out: weight=[784, 20] float32" in result.stderr


def _noise_std(*files):
    """The spread of the sampled latent when the encoder says variance 4 (std 2)."""
    encoder = testing.from_config(*files).model.encoder
    torch.manual_seed(0)
    z = encoder.reparameterize(torch.zeros(20000, 20), torch.full((20000, 20), math.log(4.0)))
    return float(z.std())


def test_the_math_bug_fails_a_statistical_test_of_the_reparameterization():
    assert abs(_noise_std(VAE) - 2.0) < 0.02
    assert abs(_noise_std(VAE, os.path.join(BUGS, "math.py")) - math.log(4.0)) < 0.02  # log-variance used as std


@pytest.mark.slow
def test_the_training_bug_fails_the_overfit_verdict(tmp_path):
    # The working VAE's verdict ('LEARNS') is checked by the walkthrough's command in test_doc_commands.py.
    result = run_rnn(VAE, os.path.join(BUGS, "training.py"), "++debug_overfit_batches", "1", cwd=tmp_path)
    assert result.returncode == 1 and "debug_overfit_batches verdict: the model does NOT learn" in result.stderr
    assert not os.path.exists(tmp_path / "output" / "vae_mnist" / "orig_data.png")  # no user callbacks ran
