"""The first-step checks on the models people train, with default options (issue 27, item 1).

Library models built from tiny configs with random init: Hugging Face GPT2LMHeadModel and
BertForSequenceClassification (their mask code calls ``.item()``/``.all()``, and they return a
``ModelOutput``), a PyTorch-tutorial ``nn.TransformerEncoder`` with ``batch_first=False`` and a
causal mask, and a ResNet written the torchvision way (timm itself cannot be installed beside the
pinned torch). Each bug is written as users write it (``tests/zoo/lib_*.py``) and must be named;
each healthy twin must print no WARNING line, and every check must run on it (no "skipped" note).
Each run is a real Engine run of a config, in process, for a few steps.
"""

from __future__ import annotations

import importlib.util
import os
import re

import numpy as np
import pytest
import torch
from torch import nn

from conftest import ROOT, captured_log
from framework.assembly import Engine
from framework.base.config import load_config
from framework.check_library.device_tracking import DeviceTracker
from framework.check_library.module_tracker import ModuleTracker
from framework.datasets.numpy_dataset import NumpyDataset
from framework.debug.padding_probe import _real_frames, _same_outputs
from framework.debug.split_overlap import overlap_findings, sequence_hashes

# Skipped without transformers; found without importing it (~1 s of CPU in every worker's collection).
pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("transformers") is None, reason="transformers is not installed"
)

ZOO = os.path.join(ROOT, "tests", "zoo")
FIRST = r"WARNING sanity check \(first step\): "

# bug -> (config files, the line that must be printed)
BUGS = {
    "device: class weights without device=, after BERT's data-dependent mask code": (
        ["lib_bert.py", "lib_bert_class_weights.py"],
        FIRST + r"device bug in module \(train_step\): aten\.cross_entropy at .*lib_bert_class_weights\.py:9 in "
        r"loss_of: .* created by torch\.tensor at .*lib_bert_class_weights\.py:8 in loss_of: weight = "
        r"torch\.tensor\(\[1\.0, 2\.0\]\) without a device",
    ),
    "device: torch.arange without device= after .item(), nn.TransformerEncoder(batch_first=False)": (
        ["lib_transformer.py", "lib_transformer_positions.py"],
        FIRST + r"device bug in module pos\.table: aten\.embedding at .*lib_transformer_positions\.py:15 .* created "
        r"by aten\.arange at .*lib_transformer_positions\.py:14 in forward: positions = torch\.arange\(length\) "
        r"without a device",
    ),
    "device: positional encodings in a plain attribute that model.to does not move": (
        ["lib_transformer.py", "lib_transformer_pe_attribute.py"],
        FIRST + r"device bug in module pos: aten\.add at .*lib_transformer\.py:\d+ in forward: return x \+ "
        r"self\.pe\[: x\.size\(0\)\] .* kept in the plain tensor attribute 'pe' of module 'pos', which "
        r"model\.to\(device\) does not move",
    ),
    "device: normalization constants without device= in a ResNet": (
        ["lib_resnet.py", "lib_resnet_normalize.py"],
        FIRST + r"device bug in module \(model\): aten\.sub at .*lib_resnet_normalize\.py:8 .* created by "
        r"torch\.tensor at .*lib_resnet_normalize\.py:7",
    ),
    "padding: GPT-2 trained with labels=input_ids, pad tokens not -100": (
        ["lib_gpt2.py", "lib_gpt2_pad_in_loss.py"],
        FIRST + r"the loss covers padding: changing only the padded frames of 'data' \(beyond the :seq_len lengths\) "
        r"changes the loss \(data: ce [\d.]+ -> [\d.]+\) while the model's outputs on the real frames stay the same",
    ),
    "loss inputs: probabilities through BERT's ModelOutput": (
        ["lib_bert.py", "lib_bert_softmax.py"],
        FIRST + r"cross_entropy at .*lib_bert_softmax\.py:6 .* expects logits, but its input is the output of softmax",
    ),
    "loss inputs: probabilities from a ResNet": (
        ["lib_resnet.py", "lib_resnet_softmax.py"],
        FIRST + r"cross_entropy at .*lib_resnet_softmax\.py:6 .* expects logits, but its input is the output of "
        r"softmax",
    ),
    "batch independence: BERT inputs_embeds standardized over the batch axis": (
        ["lib_bert.py", "lib_bert_batch_norm_embeddings.py"],
        FIRST + r"sequences of a batch influence each other: the input of module '\(model\)' "
        r"\(BertForSequenceClassification\) .* The mixing happens in train_step, before the model is called",
    ),
    "batch independence: view for transpose before nn.TransformerEncoder": (
        ["lib_transformer.py", "lib_transformer_view.py"],
        FIRST + r"sequences of a batch influence each other: the input of module 'pos' \(PositionalEncoding\) .* in "
        r"the code that calls 'pos'",
    ),
    "batch independence: a ResNet block gated by a mean over the batch axis": (
        ["lib_resnet.py", "lib_resnet_squeeze_batch.py"],
        FIRST + r"sequences of a batch influence each other: the output of module 'layer1\.0' \(BasicBlock\)",
    ),
}

HEALTHY = {
    "Hugging Face GPT2LMHeadModel, padded batches, labels -100 at the padding": ["lib_gpt2.py"],
    "Hugging Face BertForSequenceClassification, attention mask from the lengths": ["lib_bert.py"],
    "nn.TransformerEncoder(batch_first=False), causal and padding masks": ["lib_transformer.py"],
    "torchvision-style ResNet": ["lib_resnet.py"],
    "Hugging Face CodeGenForCausalLM, its rotary table a plain attribute it moves itself": [
        "lib_gpt2.py",
        "lib_codegen.py",
    ],
}


def _heavy_last(cases: dict) -> list:
    """The case names; those with a Hugging Face BERT/ViT, a ResNet or an EMA copy run in the full suite only."""
    heavy = ("BERT", "Bert", "ViT", "ResNet", "EMA")
    return [pytest.param(n, marks=pytest.mark.slow) if any(h in n for h in heavy) else n for n in cases]


@pytest.fixture
def output():
    """Log at verbosity 5 (a check that cannot run says so there); return what was logged."""
    with captured_log(5) as lines:
        yield lambda: "\n".join(lines)


def _train(files: list[str]) -> None:
    Engine(load_config([os.path.join(ZOO, f) for f in files], {"model": None})).run("train")


@pytest.mark.parametrize("name", _heavy_last(BUGS))
def test_the_bug_is_named_on_the_library_model(output, name):
    files, pattern = BUGS[name]
    _train(files)
    assert re.search(pattern, output()), f"{name}: no match for {pattern!r} in:\n{output()[-4000:]}"


@pytest.mark.parametrize("name", _heavy_last(HEALTHY))
def test_the_healthy_library_model_is_quiet_and_every_check_runs_on_it(output, name):
    _train(HEALTHY[name])
    text = output()
    assert [line for line in text.splitlines() if "WARNING" in line] == [], name
    cannot = [line for line in text.splitlines() if re.search(r"skipped|stopped early|could not check|undecided", line)]
    assert cannot == [], name
    # The device check watches the run of the unchanged batch that the loss-input check makes: no run of its own.
    (runs,) = re.findall(r"First-step checks: train_step ran \d+ extra time\(s\).*", text)
    assert "loss-input check 1" in runs and "device check" not in runs


def test_on_a_gpu_where_the_mix_fails_the_device_bug_is_named_before_the_users_error_propagates(output, tmp_path):
    failing = tmp_path / "failing_mix.py"  # the concatenation fails on any device, as a device mix does on a GPU
    failing.write_text(
        "import torch\n\n\nclass ResNet(ResNet):\n    def forward(self, x):\n"
        "        return super().forward(torch.cat([x, torch.zeros(5, 3, 8, 8)], dim=1))\n"
    )
    config = load_config([os.path.join(ZOO, "lib_resnet.py"), str(failing)], {"model": None})
    with pytest.raises(RuntimeError, match="Sizes of tensors must match") as error:
        Engine(config).run("train")
    assert re.search(
        FIRST + r"device bug in module \(model\): aten\.cat at .*failing_mix\.py:6 .* created by aten\.zeros", output()
    )
    assert "Raised while the loss-input check ran train_step" in "\n".join(error.value.__notes__)


# The device tracking, call by call: a bug on a GPU is named, correct code is not.


class _Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 4)
        self.rnn = nn.LSTM(4, 4, batch_first=True)

    def forward(self, x):
        return self.lin(x)


GLOBAL = torch.ones(4)


def _track(step):
    model = _Net()
    batch = {"data": torch.randn(3, 5, 4), "data:seq_len": torch.tensor([5, 3, 2])}
    tracker = ModuleTracker(model)
    devices = DeviceTracker(model, batch, tracker, {"GLOBAL": GLOBAL})
    with tracker, devices:
        step(model, batch)
    assert devices.broken is None
    return devices.finding


def _pack(model, batch):
    packed = nn.utils.rnn.pack_padded_sequence(
        batch["data"], batch["data:seq_len"].cpu(), batch_first=True, enforce_sorted=False
    )
    return nn.utils.rnn.pad_packed_sequence(model.rnn(packed)[0], batch_first=True)


CORRECT = {
    "device=x.device": lambda m, b: m(b["data"]) + torch.randn(3, 5, 4, device=b["data"].device),
    "randn_like": lambda m, b: m(b["data"]) + torch.randn_like(b["data"]),
    "a 0-dim tensor": lambda m, b: m(b["data"]) * torch.tensor(2.0),
    ".to(x.device)": lambda m, b: m(b["data"]) + torch.ones(4).to(b["data"].device),
    ".to(x)": lambda m, b: m(b["data"]) + torch.ones(4).to(b["data"]),
    ".type_as(x)": lambda m, b: m(b["data"]) + torch.ones(4).type_as(b["data"]),
    "x.new_zeros": lambda m, b: m(b["data"]) + b["data"].new_zeros(4),
    "lengths moved": lambda m, b: (
        torch.arange(5, device=b["data"].device) < b["data:seq_len"].to(b["data"].device)[:, None]
    ),
    "CPU indices": lambda m, b: m(b["data"])[torch.tensor([0, 2])],
    "pack_padded_sequence(lengths.cpu())": _pack,
    ".cpu() for numpy": lambda m, b: m(b["data"]).detach().cpu().numpy(),
    "1 - x": lambda m, b: 1 - m(b["data"]),
}
BUGGY = {
    "randn without device": (lambda m, b: m(b["data"]) + torch.randn(3, 5, 4), "aten.add", "created by aten.randn"),
    ".cpu() mixed back": (lambda m, b: m(b["data"]).cpu() + m(b["data"]), "aten.add", "moved to the CPU by .cpu()"),
    "CPU lengths": (
        lambda m, b: torch.arange(5, device=b["data"].device) < b["data:seq_len"][:, None],
        "aten.lt",
        "created as extern_data['data:seq_len']",
    ),
    "global tensor": (lambda m, b: m(b["data"]) + GLOBAL, "aten.add", "kept in the config's global 'GLOBAL'"),
    "CPU indices into an embedding": (
        lambda m, b: nn.functional.embedding(torch.randint(0, 4, (3,)), m.lin.weight),
        "aten.embedding",
        "created by aten.randint",
    ),
    "index_select with CPU indices": (
        lambda m, b: m(b["data"]).index_select(0, torch.tensor([0, 2])),
        "aten.index_select",
        "created by torch.tensor",
    ),
    "torch.where with a CPU condition": (
        lambda m, b: torch.where(torch.ones(3, 5, 4, dtype=torch.bool), m(b["data"]), 0.0),
        "aten.where",
        "created by aten.ones",
    ),
}


@pytest.mark.parametrize("name", list(CORRECT))
def test_code_that_keeps_tensors_on_the_models_device_is_quiet(name):
    assert _track(CORRECT[name]) is None


@pytest.mark.parametrize("name", list(BUGGY))
def test_a_tensor_on_a_fixed_device_is_named_where_it_meets_the_models(name):
    step, op, origin = BUGGY[name]
    finding = _track(step)
    assert (
        finding is not None and f": {op} at " in finding and origin in finding and "test_library_models.py" in finding
    )


def test_the_tracking_changes_no_result_and_a_failure_of_its_own_stops_only_the_tracking(monkeypatch):
    model, x = _Net(), torch.randn(3, 4)
    tracker = ModuleTracker(model)
    devices = DeviceTracker(model, {"data": x}, tracker)
    with tracker, devices:
        same = x.cpu()  # on a CPU machine the same object: an alias keeps the two apart
        y = model(x)
    assert same is not x and same.data_ptr() == x.data_ptr() and torch.equal(y, model(x))
    monkeypatch.setattr(DeviceTracker, "_label", lambda *_args: 1 / 0)
    devices = DeviceTracker(model, {"data": x}, tracker)
    with tracker, devices:
        assert torch.equal(model(x) + torch.randn(3, 4) * 0, model(x))
    assert devices.broken is not None and "ZeroDivisionError" in devices.broken


def test_an_op_that_fails_at_the_mix_names_the_device_bug():
    model = _Net()
    tracker = ModuleTracker(model)
    devices = DeviceTracker(model, {"data": torch.randn(3, 5, 4)}, tracker)
    with tracker, devices, pytest.raises(RuntimeError) as error:  # on a GPU, the mix itself fails
        torch.cat([model.lin.weight, torch.zeros(3)])
    assert "The device check found this first: device bug" in "\n".join(error.value.__notes__)


# The padding check compares the model's outputs on the real frames, never a loss it returns.


def test_outputs_are_compared_at_the_real_frames_whatever_their_layout():
    mask = torch.tensor([[False, False, True], [False, True, True]])  # True: padding; B = 2, T = 3
    logits = torch.arange(2 * 3 * 5.0).reshape(2, 3, 5)
    assert torch.equal(_real_frames(logits, mask), logits[~mask])
    assert torch.equal(_real_frames(logits.transpose(0, 1), mask), logits[~mask])  # time-major [T, B, F]
    assert torch.equal(_real_frames(logits.reshape(6, 5), mask), logits[~mask])  # flattened [B*T, F]
    assert torch.equal(_real_frames(logits[:, 0], mask), logits[:, 0])  # per sequence: whole
    assert _real_frames(torch.tensor(1.5), mask) is None and _real_frames(torch.ones(7), mask) is None
    moved = logits.clone()
    moved[mask] += 1.0  # only the padded frames' outputs change
    loss = [("loss", torch.tensor(3.0)), ("logits", logits)]
    assert _same_outputs(loss, [("loss", torch.tensor(3.5)), ("logits", moved)], mask) is True
    assert _same_outputs(loss, [("loss", torch.tensor(3.0)), ("logits", logits + 1)], mask) is False
    assert _same_outputs([("loss", torch.tensor(3.0))], [("loss", torch.tensor(3.5))], mask) is None  # only a loss


# The split check on tokenized data: variable-length storage, natural duplicates of short sequences.


def test_the_split_check_hashes_ragged_data_and_calls_natural_duplicates_a_note():
    ragged = NumpyDataset({"data": {"values": np.arange(20), "offsets": np.array([0, 3, 7, 12, 20])}})
    hashes, cut = sequence_hashes(ragged)
    assert len(set(hashes)) == 4 and not cut
    train = (list(range(1000)), False)
    assert [f.severity for f in overlap_findings(train, {"dev": ([7] + list(range(5000, 5031)), False)})] == ["note"]
    repeating = (list(range(950)) + list(range(50)), False)  # train repeats 5% of its own sequences
    (natural,) = overlap_findings(repeating, {"dev": (list(range(8)) + list(range(5000, 5092)), False)})
    assert natural.severity == "note" and "natural duplicates" in natural.message
    (copied,) = overlap_findings(repeating, {"dev": (list(range(40)) + list(range(5000, 5060)), False)})
    assert copied.severity == "warning"
