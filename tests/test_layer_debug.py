"""Layer output template (meta dry run), device bugs, per-step shapes, exception context."""

import dataclasses
import os
import re

import pytest
import torch

from conftest import ROOT, TINY_CONFIG, run_rnn, tiny_config_with
from framework.assembly import Engine
from framework.base import log
from framework.base.config import load_config
from framework.debug.layer_template import symbolic_dim

MODEL_WITH_BUGS = """
import torch
from torch import nn

decoder_in = 8
noise_on_input_device = False


class Noise(nn.Module):
    def forward(self, x):
        noise = torch.randn(*x.shape, device=x.device if noise_on_input_device else None) * 0.1
        return x + noise


class Decoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.hidden = nn.Linear(8, 8)
        self.output = nn.Linear(decoder_in, 3)

    def forward(self, x):
        return self.output(torch.relu(self.hidden(x)))


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.encoder = nn.Linear(4, 8)
        self.noise = Noise()
        self.decoder = Decoder()
        self.unused = nn.Linear(8, 8)

    def forward(self, x):
        return self.decoder(self.noise(self.encoder(x)))


def get_model(**_kwargs):
    return Net()
"""


@pytest.fixture
def buggy_config(tmp_path):
    return tiny_config_with(tmp_path, MODEL_WITH_BUGS)


def test_symbolic_dims():
    assert [symbolic_dim(a, b) for a, b in [(3, 5), (7, 13), (21, 65), (14, 26), (3, 6), (6, 12), (64, 64)]] == [
        "B",
        "T",
        "B*T",
        "2*T",
        "T//2",
        "T-1",
        "64",
    ]


def test_template_prints_symbolic_shapes_of_every_module():
    log.setup(verbosity=2)
    from framework.debug.layer_template import layer_output_template

    config = load_config([os.path.join(ROOT, "configs", "task12ax_lstm.py")], {"model": None})
    engine = Engine(config)
    masked = load_config([config.files[0]], {"model": None, "train_step": _masked_train_step})
    with engine.running():  # CLOSE gives back what STARTUP took (signal handlers)
        engine.init_train()
        text = layer_output_template(engine.state)
        # A boolean mask needs real values: the meta dry run stops there, and runs on zeros on the device instead.
        masked_text = layer_output_template(dataclasses.replace(engine.state, config=masked))
    assert "extern_data data: [B, T] int64 sparse_dim=9" in text
    assert re.search(r"embed +Embedding -> \[B, T, 16\] float32", text)
    assert re.search(r"lstm +LSTM -> \[B, T, 32\] float32, \[1, B, 32\] float32, \[1, B, 32\] float32", text)
    assert re.search(r"output +Linear -> \[B, T, 2\] float32", text)
    assert "stopped early" not in text  # its loss leaves the padding out without a boolean mask
    assert masked_text.startswith("Layer output template (dry run with zero-valued inputs on cpu, as the model needs")
    assert "stopped early" not in masked_text and "not called" not in masked_text
    assert re.search(r"lstm +LSTM -> \[B, T, 32\] float32, \[1, B, 32\] float32, \[1, B, 32\] float32", masked_text)
    assert all(p.device.type == "cpu" for p in engine.state.model.parameters())  # real parameters are back


def _masked_train_step(*, model, extern_data, run_ctx, **_kwargs):
    logits, targets = model(extern_data["data"]), extern_data["classes"]
    lengths = extern_data["classes:seq_len"].to(targets.device)
    mask = torch.arange(targets.shape[1], device=targets.device)[None, :] < lengths[:, None]
    run_ctx.mark_as_loss(name="ce", loss=torch.nn.functional.cross_entropy(logits[mask], targets[mask]))


def test_template_reports_a_device_bug_with_module_and_line_on_cpu(buggy_config):
    result = run_rnn(buggy_config, "++debug_print_layer_output_template", "True", "++num_epochs", "1")
    assert result.returncode == 0, result.stderr  # a warning: training on the CPU still works
    assert re.search(
        r"DEVICE BUG in module noise: aten\.add at .*config\.py:\d+ in forward: return x \+ noise .* created by "
        r"aten\.randn at .*config\.py:\d+ in forward: noise = torch\.randn\(\*x\.shape, device=x\.device if",
        result.stdout,
    ), result.stdout
    assert re.search(r"unused +Linear: not called", result.stdout)
    fixed = run_rnn(
        buggy_config,
        "++debug_print_layer_output_template",
        "True",
        "++num_epochs",
        "1",
        "++noise_on_input_device",
        "True",
    )
    assert (
        fixed.returncode == 0
        and "DEVICE BUG" not in fixed.stdout
        and re.search(r"decoder\.output +Linear -> \[B, 3\] float32", fixed.stdout)
    )


def test_exception_in_the_model_names_the_layer_path_and_both_shapes(buggy_config):
    result = run_rnn(buggy_config, "++decoder_in", "6")
    assert result.returncode == 1
    err = result.stderr
    assert "RuntimeError: mat1 and mat2 shapes cannot be multiplied (16x8 and 6x3)" in err  # type and text kept
    assert "torch/nn/modules/linear.py:" in err  # the original traceback, its library frames folded
    assert "module call path: (model) -> decoder -> decoder.output (Linear)" in err
    assert "inputs of decoder.output.forward: input=[16, 8] float32 cpu" in err
    assert "parameters of decoder.output: weight=[3, 6] float32 cpu, bias=[3] float32 cpu" in err
    assert re.search(r"raised during train step at epoch 1, global step 0 \(batch of 16 sequences", err)
    assert "batch: data=[16, 4] float32 cpu, classes=[16] int64 cpu" in err


def test_layer_output_shapes_are_printed_every_step(capsys):
    log.setup(verbosity=4)
    engine = Engine(load_config([TINY_CONFIG], {"debug_print_layer_output_shape": True, "num_epochs": 1}))
    engine.run("train")
    lines = [line for line in capsys.readouterr().out.splitlines() if "layer outputs:" in line]
    assert len(lines) == engine.state.global_step
    assert lines[0] == (
        "ep 1 step 0 layer outputs: 0 [16, 8] float32; 1 [16, 8] float32; 2 [16, 8] float32; "
        "3 [16, 3] float32; (model) [16, 3] float32"
    )
