"""Silent bugs of issue 28, classes 1, 5 and 6: eval-mode integrity, randomness repeated by DataLoader
workers, loss and layout contracts.

Each bug is written as users write it (``tests/zoo/silent_eval_*``, ``silent_workers_*``,
``silent_contract_*``, layered on a healthy base) and must be named with its module, attribute or
line; each healthy twin, and the library models people train, must print no WARNING line. Runs are
Engine runs in process, with default options.
"""

from __future__ import annotations

import os
import re

import numpy as np
import pytest
import torch
from devkit.doc_commands import assert_documented

from conftest import ROOT, captured_log
from framework.assembly import Engine
from framework.base.config import load_config
from framework.base.rng import get_rng_state
from framework.datasets import init_dataset
from framework.datasets.extern_data import parse_extern_data
from framework.datasets.loader import BatchLoader
from framework.datasets.worker_seeding import repeating_generators
from framework.debug.input_layout import moved_axes

pytest.importorskip("transformers")

ZOO = os.path.join(ROOT, "tests", "zoo")
FIRST = r"WARNING sanity check \(first step\): "
EVAL = r"WARNING sanity check \(first evaluation\): "
RESEEDED = r"The framework reseeds it in each worker from torch's worker seed"

BUGS = {
    "eval: F.dropout without training=self.training": (
        ["silent_eval_base.py", "silent_eval_functional_dropout.py"],
        [
            FIRST + r"randomness is active in evaluation: a random mask \(bernoulli_, applied by mul\) .* at "
            r".*silent_eval_functional_dropout\.py:8 in forward: h = F\.dropout\(F\.relu\(self\.mix\(h\)\), p=0\.3\) "
            r"in module '\(model\)' \(Net\)"
        ],
    ),
    "eval: F.dropout(training=True)": (
        ["silent_eval_base.py", "silent_eval_dropout_training_true.py"],
        [FIRST + r"randomness is active in evaluation: .* at .*silent_eval_dropout_training_true\.py:7 in forward"],
    ),
    "eval: noise injection not gated by self.training": (
        ["silent_eval_base.py", "silent_eval_noise.py"],
        [
            FIRST + r"randomness is active in evaluation: random noise \(randn_like\) of a fixed scale is added .* at "
            r".*silent_eval_noise\.py:9 in forward: h = h \+ 0\.3 \* torch\.randn_like\(h\)"
        ],
    ),
    "eval: train_step calls model.eval()": (
        ["silent_eval_base.py", "silent_eval_train_step_eval.py"],
        [
            FIRST + r"module '\(model\)' \(Net\) runs its forward in eval mode during the training step: train_step "
            r"switched it at .*silent_eval_train_step_eval\.py:7 in train_step: model\.eval\(\)\. Its parts that "
            r"depend on the mode \(.*BatchNorm1d 'norm', Dropout\(p=0.2\) 'drop'"
        ],
    ),
    "eval: Hugging Face GPT-2 trained in eval mode": (
        ["lib_gpt2.py", "silent_eval_hf_gpt2_eval.py"],
        [
            FIRST + r"module '\(model\)' \(GPT2LMHeadModel\) runs its forward in eval mode during the training step: "
            r"train_step switched it at .*silent_eval_hf_gpt2_eval\.py:\d+ in train_step: model\.eval\(\)"
        ],
    ),
    "eval: Hugging Face BERT with a functional dropout on the pooled output": (
        ["lib_bert.py", "silent_eval_hf_bert_dropout.py"],
        [FIRST + r"randomness is active in evaluation: a random mask .* at .*silent_eval_hf_bert_dropout\.py:\d+ in"],
    ),
    "eval: EMA copy updated parameter by parameter (batch norm, spectral norm)": (
        ["silent_eval_base.py", "silent_eval_ema_bn.py"],
        [
            EVAL + r"module 'ema\.norm' \(BatchNorm1d\) is evaluated with its running statistics \(running_mean, "
            r"running_var\) as they were initialised: its parameters changed in epoch 1",
            EVAL + r"module 'ema\.mix' \(Linear\) is evaluated with its spectral-norm power-iteration vectors "
            r"\(weight_u, weight_v\) as they were initialised",
        ],
    ),
    "contract: mse_loss on the class ids": (
        ["silent_contract_images.py", "silent_contract_mse_ids.py"],
        [
            FIRST + r"mse_loss at .*silent_contract_mse_ids\.py:13 in train_step: .* regresses on the class ids of the "
            r"sparse key 'classes' \(4 classes\)"
        ],
    ),
    "contract: nn.SmoothL1Loss on [B, 1] class ids": (
        ["silent_contract_images.py", "silent_contract_l1_ids.py"],
        [FIRST + r"smooth_l1_loss at .*silent_contract_l1_ids\.py:16 .* regresses on the class ids of .*'classes'"],
    ),
    "contract: Hugging Face BERT with num_labels=1 (MSELoss on the class ids)": (
        ["lib_bert.py", "silent_contract_hf_bert4.py", "silent_contract_hf_bert_regression.py"],
        [
            FIRST
            + r"mse_loss at .*silent_contract_hf_bert4\.py:\d+ in train_step: out = model\(.* regresses on the class ids"
        ],
    ),
    "contract: NHWC images viewed as NCHW for a Conv2d": (
        ["silent_contract_images.py", "silent_contract_view_nhwc.py"],
        [
            FIRST + r"batch key 'data' \(declared shape \(8, 8, 3\), here \[32, 8, 8, 3\]\) is turned into \[32, 3, 8, "
            r"8\] by \.view at .*silent_contract_view_nhwc\.py:3 .* \.permute\(0, 3, 1, 2\)"
        ],
    ),
    "contract: scaled NHWC images reshaped to NCHW": (
        ["silent_contract_images.py", "silent_contract_reshape_scaled.py"],
        [FIRST + r"batch key 'data' .* by \.reshape at .*silent_contract_reshape_scaled\.py:4"],
    ),
    "contract: pixel_values of a Hugging Face ViT made with .view": (
        ["silent_contract_images.py", "silent_contract_hf_vit.py", "silent_contract_hf_vit_view.py"],
        [FIRST + r"batch key 'data' .* by \.view at .*silent_contract_hf_vit_view\.py:3 in pixel_values_of"],
    ),
    "workers: dataset-owned numpy generator": (
        ["silent_workers_base.py", "silent_workers_numpy_rng.py"],
        [
            r"Dataset 'train' \(NoisyClusters\) draws from its own random generator dataset\.rng \(numpy\.Generator\)"
            r".* " + RESEEDED
        ],
    ),
    "workers: random.Random inside an augmentation object": (
        ["silent_workers_base.py", "silent_workers_python_random.py"],
        [r"own random generator dataset\.augment\.random \(random\.Random\) .* " + RESEEDED],
    ),
    "workers: dataset-owned torch.Generator": (
        ["silent_workers_base.py", "silent_workers_torch_generator.py"],
        [r"own random generator dataset\.generator \(torch\.Generator\) .* " + RESEEDED],
    ),
}

HEALTHY = {
    "dropout, batch norm, spectral norm, F.dropout(training=self.training)": ["silent_eval_base.py"],
    "frozen teacher in eval mode under no_grad": ["silent_eval_base.py", "silent_eval_teacher.py"],
    "Monte Carlo dropout: the evaluation averages 8 passes of one input": [
        "silent_eval_base.py",
        "silent_eval_mc_dropout.py",
    ],
    "batch norm kept in eval mode by the model's train()": ["silent_eval_base.py", "silent_eval_frozen_norm.py"],
    "get_model returns the model in eval mode (the engine calls train())": [
        "silent_eval_base.py",
        "silent_eval_get_model_eval.py",
    ],
    "channels-last images moved with permute": ["silent_contract_images.py"],
    "Hugging Face ViT, pixel_values by permute": ["silent_contract_images.py", "silent_contract_hf_vit.py"],
    "Hugging Face BERT, 4 classes, cross-entropy": ["lib_bert.py", "silent_contract_hf_bert4.py"],
    "workers: noise seeded per sequence and epoch": ["silent_workers_base.py"],
    "workers: numpy's global generator (torch reseeds it per worker)": [
        "silent_workers_base.py",
        "silent_workers_global_numpy.py",
    ],
    "workers: an owned generator without workers": [
        "silent_workers_base.py",
        "silent_workers_numpy_rng.py",
        "silent_workers_main_process.py",
    ],
    "Hugging Face GPT-2 with dropout": ["lib_gpt2.py"],
    "Hugging Face BERT with dropout": ["lib_bert.py"],
    "ResNet with batch norm": ["lib_resnet.py"],
    "nn.TransformerEncoder with dropout": ["lib_transformer.py"],
    "a policy that samples its actions, also in evaluation (REINFORCE)": [
        "classify.py",
        "silent_eval_sampled_actions.py",
    ],
}

MINE = (
    r"randomness is active in evaluation|runs its forward in eval mode|as they were initialised|regresses on the "
    r"class ids|is turned into .* by \.(view|reshape)|draws from its own random generator"
)


@pytest.fixture
def output():
    """Log at verbosity 5 into a list; return what was logged."""
    with captured_log(5, stdout=False) as lines:
        yield lambda: "\n".join(lines)


def _train(files: list[str], **overrides) -> None:
    paths = [f if os.path.isabs(f) else os.path.join(ZOO, f) for f in files]
    Engine(load_config(paths, {"model": None, **overrides})).run("train")


@pytest.mark.slow  # real runs of each zoo config: the full suite runs them
@pytest.mark.parametrize("name", list(BUGS))
def test_the_bug_is_named(output, name):
    files, patterns = BUGS[name]
    _train(files)
    for pattern in patterns:
        assert re.search(pattern, output()), f"{name}: no match for {pattern!r} in:\n{output()[-4000:]}"
    if name == "eval: F.dropout without training=self.training":
        assert_documented(output(), "docs/health.rst", "WARNING sanity check (first step): randomness is active")


@pytest.mark.slow
@pytest.mark.parametrize("name", list(HEALTHY))
def test_the_healthy_twin_is_quiet(output, name):
    _train(HEALTHY[name])
    assert [line for line in output().splitlines() if "WARNING" in line] == [], name
    assert not re.search(MINE, output()), name


def test_a_correct_ema_copy_is_quiet(output):
    """The EMA copy that copies the buffers; its parameters do not require grad and do not run in training, which
    the sanity check notes (not "frozen by mistake": freezing what the step never runs changes nothing)."""
    _train(["silent_eval_base.py", "silent_eval_ema_bn.py", "silent_eval_ema_ok.py"])
    assert not re.search(MINE, output())
    assert [line for line in output().splitlines() if "WARNING" in line] == []
    assert "module 'ema.out' (Linear): weight, bias do not require grad and did not run in the first training" in (
        output()
    )


def test_the_checks_are_switched_off_by_their_options(output):
    _train(["silent_eval_base.py", "silent_eval_functional_dropout.py"], debug_eval_mode=False)
    _train(["silent_contract_images.py", "silent_contract_view_nhwc.py"], debug_input_layout=False)
    _train(["silent_contract_images.py", "silent_contract_mse_ids.py"], debug_loss_on_class_ids=False)
    _train(["silent_workers_base.py", "silent_workers_numpy_rng.py"], debug_worker_randomness=False, num_epochs=1)
    assert not re.search(MINE, output())


@pytest.mark.slow  # seconds of real runs: the full suite runs it, the fast subset does not
def test_the_vae_demo_that_samples_in_evaluation_is_quiet(output, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # the demo writes its pictures below the working directory
    pixels = {"class": "NumpyDataset", "arrays": {"data": np.random.default_rng(0).random((64, 784), np.float32)}}
    vae = os.path.join(ROOT, "configs", "vae_mnist.py")
    Engine(load_config([vae], {"model": None, "num_epochs": 1, "train": pixels, "dev": pixels})).run("train")
    assert "Epoch 1 evaluation" in output()
    assert not re.search(MINE, output()), output()[-3000:]


# --------------------------------------------------------------------------- data pipeline randomness
def _noise_by_batch(files: list[str], reseeded: bool, epochs: int = 2) -> list[np.ndarray]:
    """The augmentation noise of each batch of ``epochs`` epochs, loaded by 2 workers."""
    torch.manual_seed(0)  # as the engine seeds it: the workers' seeds come from torch's generator
    config = load_config([os.path.join(ZOO, f) for f in files], {"model": None})
    dataset = init_dataset(config.get("train"), option="train", random_seed=0)
    extern = parse_extern_data(config.get("extern_data"))
    loader = BatchLoader(
        dataset,
        extern,
        option="train",
        batch_size=32,
        max_seqs=None,
        device=torch.device("cpu"),
        dataloader_opts={"num_workers": 2},
    )
    if reseeded:
        plan = loader.plan(1)
        loader = loader.reseeding(tuple(repeating_generators(dataset, plan[0][:2])))
    noise = []
    clean = type(dataset).__mro__[2].get_batch  # GaussianClustersDataset's, without the augmentation
    for epoch in range(1, epochs + 1):
        plan = loader.plan(epoch)
        for indices, batch in loader.iterate(plan):
            noise.append(batch["data"].numpy() - clean(dataset, indices)["data"])
    return noise


def test_an_owned_generator_repeats_in_every_worker_and_epoch_and_the_reseeding_makes_it_random():
    files = ["silent_workers_base.py", "silent_workers_numpy_rng.py"]
    repeated = _noise_by_batch(files, reseeded=False)

    def same(a, b):  # noise = (data + noise) - data, in float32; the last batch is smaller
        return a.shape == b.shape and np.allclose(a, b, atol=1e-5)

    assert same(repeated[0], repeated[1])  # worker 0 and worker 1
    assert same(repeated[0], repeated[len(repeated) // 2])  # epoch 1 and epoch 2
    fixed = _noise_by_batch(files, reseeded=True)
    assert not any(same(a, b) for i, a in enumerate(fixed) for b in fixed[i + 1 :])  # no batch repeats another
    assert same(fixed[0], _noise_by_batch(files, reseeded=True)[0])  # reproducible


def test_finding_the_generators_changes_no_random_state():
    config = load_config([os.path.join(ZOO, f) for f in ("silent_workers_base.py", "silent_workers_numpy_rng.py")], {})
    dataset = init_dataset(config.get("train"), option="train", random_seed=0)
    before_owned = dataset.rng.bit_generator.state
    before = get_rng_state()
    assert list(repeating_generators(dataset, np.arange(2))) == ["rng"]
    assert dataset.rng.bit_generator.state == before_owned
    after = get_rng_state()
    assert torch.equal(before["torch"], after["torch"]) and before["python"] == after["python"]


# ------------------------------------------------------------------------------------- input layout
@pytest.mark.parametrize(
    ("before", "after", "moved"),
    [
        ((32, 8, 8, 3), (32, 3, 8, 8), [0, 3, 1, 2]),
        ((4, 50, 80), (4, 80, 50), [0, 2, 1]),
        ((32, 28, 28, 1), (32, 1, 28, 28), None),  # one channel: the same memory order, nothing moves
        ((32, 784), (32, 1, 28, 28), None),  # a real reshape
        ((4, 6, 64), (4, 6, 8, 8), None),  # heads split off
    ],
)
def test_a_reshape_that_only_reorders_sizes_is_told_from_a_real_one(before, after, moved):
    assert moved_axes(before, after) == moved
