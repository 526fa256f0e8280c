"""A warning means a bug: zero or tiny gradients by design are not called dead or vanishing.

Healthy standard models trained for a short run with default options print no WARNING line:
ResNets whose residual blocks start as the identity (timm's zero_init_last, torchvision's
zero_init_residual), a residual MLP gated by ReZero, a zero-initialised output layer and
LayerScale, a tiny Hugging Face BERT (its attention query/key weights get tiny gradients from
BERT's initialisation), a tiny GPT-2 whose output layer is tied to the token embedding, and two
models initialised as timm initialises them (a ResNet-18 whose last stage sees 1x1 feature maps,
where only the centre tap of each 3x3 kernel gets a gradient; a ViT whose class token starts at
1e-6 scale). The
same checks still name a ReLU that never fires and a gradient that truly vanishes, also inside a
model whose other zero gradients are by design. Each run is a real Engine run of a config in
tests/zoo/, in process.
"""

from __future__ import annotations

import os

import pytest
import torch

from conftest import ROOT
from framework.assembly import Engine
from framework.base import log
from framework.base.config import load_config
from framework.check_library import model_checks

ZOO = os.path.join(ROOT, "tests", "zoo")

HEALTHY = {
    "timm-style ResNet, zero_init_last": ["resnet_zero_init.py"],
    "torchvision-style ResNet, zero_init_residual, SGD": ["resnet_zero_init_residual.py"],
    "ReZero gate, zero-initialised output layer, LayerScale": ["classify.py", "gated_residual.py"],
    "Hugging Face BertForSequenceClassification": ["hf_bert.py"],
    "Hugging Face GPT2LMHeadModel, tied embeddings": ["hf_gpt2.py"],
}


def _run(files: list[str], **overrides) -> Engine:
    engine = Engine(load_config([os.path.join(ZOO, f) for f in files], overrides))
    engine.run("train")
    return engine


def _warnings(text: str) -> list[str]:
    return [line for line in text.splitlines() if "WARNING" in line]


# With the defaults (debug_grad_health 100), these setups are test_healthy_corpus.py's runs, with the same config
# files and options, where no WARNING or ERROR line and no finding of severity warning or error may appear: a run
# here would repeat that run and check less. Their runs with the check at every update are this file's own.
IN_THE_HEALTHY_CORPUS = {
    "timm-style ResNet, zero_init_last",
    "torchvision-style ResNet, zero_init_residual, SGD",
    "ReZero gate, zero-initialised output layer, LayerScale",
    "Hugging Face GPT2LMHeadModel, tied embeddings",
}


# The fast subset keeps one of these runs, the timm-style ResNet with the check at every update (2.2 s of CPU); the
# others (BERT at the defaults 4.4 s, and with the check at every update ReZero 3.7 s, the torchvision-style ResNet
# 2.2 s, BERT 2.2 s, GPT-2 1.7 s, in a full run's per-test record) are left to the full suite.
FAST = {("timm-style ResNet, zero_init_last", 1)}


def _slow_if(slow: bool) -> tuple:
    return (pytest.mark.slow,) if slow else ()


@pytest.mark.parametrize(
    "name, grad_health",
    [
        pytest.param(name, grad_health, id=f"{name}-{label}", marks=_slow_if((name, grad_health) not in FAST))
        for name in HEALTHY
        for grad_health, label in ((100, "defaults"), (1, "grad_health_every_update"))
        if not (grad_health == 100 and name in IN_THE_HEALTHY_CORPUS)
    ],
)
def test_a_healthy_model_with_gradients_zero_or_tiny_by_design_gets_no_warning(output, name, grad_health):
    _run(HEALTHY[name], debug_grad_health=grad_health)
    assert _warnings(output()) == [], name


def test_parameters_a_library_creates_frozen_are_no_finding_and_a_users_freeze_names_its_line(output):
    """Marian's sinusoidal position tables are parameters created with requires_grad=False by the library. A user's
    frozen encoder under a trained decoder (Hugging Face's seq2seq scripts' --freeze_encoder) is a fixed part by
    design: a note that names the line, no warning (a frozen layer after which nothing trains is one: test_health)."""
    _run(["lib_marian.py"], num_epochs=1)
    assert _warnings(output()) == []
    log.setup(verbosity=5)
    _run(["lib_marian.py"], num_epochs=1, get_model=_marian_with_frozen_encoder)
    text = output()
    assert _warnings(text) == []
    note = next(line for line in text.splitlines() if "a fixed part by design" in line)
    assert "module 'model.encoder.layers.0.self_attn.k_proj'" in note
    assert "frozen at tests/test_false_alarms.py" in note and "p.requires_grad = False" in note


def _marian_with_frozen_encoder(**kwargs):
    model = load_config([os.path.join(ZOO, "lib_marian.py")]).get("get_model")(**kwargs)
    for p in model.model.encoder.parameters():
        p.requires_grad = False
    return model


# A ResNet-18 at full width trains for most of a minute: the full suite runs it, the fast subset does not.
@pytest.mark.parametrize("model", [pytest.param("timm_resnet18.py", marks=pytest.mark.slow), "timm_vit.py"])
def test_models_initialised_as_timm_initialises_them_get_no_warning_in_a_two_epoch_run(output, model):
    """Found on timm's own resnet18 and vit_tiny on a GPU: the last stage of a ResNet-18 sees 1x1 feature
    maps (only the centre tap of each 3x3 kernel gets a gradient, which evenly spaced samples missed), and
    the ViT's class token starts at 1e-6 scale (Adam's first update dwarfs its norm)."""
    _run(["quadrants.py", model])
    assert _warnings(output()) == [], model


def test_the_zero_gradients_at_step_0_are_explained_by_the_zero_initialised_weights(output):
    log.setup(verbosity=5)
    _run(["resnet_zero_init.py"], num_epochs=1)
    # the note itself (the run summary repeats its first sentence)
    (note,) = [line for line in output().splitlines() if line.startswith("Note") and "exactly zero at step 0" in line]
    assert "module 'layers.0.conv1' (Conv2d): weight" in note
    assert "exactly zero at initialisation: module 'layers.0.bn2' (BatchNorm2d): weight" in note
    assert "Judged again over the next 8 updates" in note


def test_a_relu_that_never_fires_is_named(output):
    _run(["classify.py", "dead_relu.py"], num_epochs=1)
    (line,) = [w for w in _warnings(output()) if "exactly zero" in w]
    assert line.startswith("WARNING sanity check (first 9 updates): module '0' (Linear): weight, bias; module '2'")
    assert "at step 0 and in each of the 8 updates after it: dead units (a ReLU that never fires)" in line


def test_a_dead_block_is_named_among_blocks_that_start_at_zero_by_design(output):
    _run(["resnet_zero_init.py", "resnet_dead_block.py"], num_epochs=1)
    (line,) = [w for w in _warnings(output()) if "exactly zero" in w]
    assert "module 'layers.3.conv1' (Conv2d): weight; module 'layers.3.bn1' (BatchNorm2d): weight, bias" in line
    assert "'layers.0." not in line and "'layers.2." not in line  # zero at step 0 only: by design


@pytest.mark.slow
def test_a_truly_vanishing_gradient_is_named_in_a_short_run(output):
    _run(["classify.py", "deep_sigmoid.py"], num_epochs=1)
    lines = [w for w in _warnings(output()) if "vanishing gradients" in w]
    assert lines, "no vanishing-gradient warning"
    assert lines[0].startswith(
        "WARNING gradient health: vanishing gradients from step 0 to step 8: module '0' (Linear)"
    )
    assert "below 0.0001 x that of '38.weight'" in lines[0] and "they hardly learn" in lines[0]


def test_a_one_step_assertion_names_the_zero_weights_that_block_the_gradient():
    namespace: dict = {}
    with open(os.path.join(ZOO, "resnet_zero_init.py"), encoding="utf-8") as f:
        exec(compile(f.read(), "resnet_zero_init.py", "exec"), namespace)
    model = namespace["ResNet"]()
    torch.nn.functional.cross_entropy(model(torch.randn(4, 12, 12)), torch.tensor([0, 1, 2, 0])).backward()
    (finding,) = model_checks.gradient_findings(model, [])
    assert "get a gradient that is exactly zero (at this step)" in finding.message
    assert "parameters that are exactly zero (module 'layers.0.bn2' (BatchNorm2d): weight" in finding.message
