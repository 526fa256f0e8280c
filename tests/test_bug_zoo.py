"""Bugs people make, each run as a real training process with default options, and their healthy twins.

Every bug must be named by the framework (a WARNING or ERROR line that says what is wrong and
where); every healthy twin must train without a single WARNING. The configs are in tests/zoo/:
a healthy base per kind of model, and one file per bug that redefines one thing of it.
"""

from __future__ import annotations

import os
import re
from concurrent.futures import ThreadPoolExecutor

import pytest
from devkit.doc_commands import assert_documented

from conftest import ROOT, run_rnn

pytestmark = pytest.mark.slow

ZOO = os.path.join(ROOT, "tests", "zoo")

# bug class -> (config files, regular expressions that the output must match)
BUGS = {
    "softmax into cross_entropy": (
        ["classify.py", "softmax_into_ce.py"],
        [
            r"WARNING .*cross_entropy at .*classify\.py:\d+ .* expects logits, but its input is the output of softmax in "
            r"module '3'"
        ],
    ),
    "log_softmax into cross_entropy": (
        ["classify.py", "log_softmax_into_ce.py"],
        [r"WARNING .*cross_entropy .* output of log_softmax in module '\(model\)' at .*log_softmax_into_ce\.py:12"],
    ),
    "sigmoid into binary_cross_entropy_with_logits": (
        ["classify.py", "sigmoid_into_bce_logits.py"],
        [r"WARNING .*binary_cross_entropy_with_logits at .*:9 .* output of sigmoid at .*sigmoid_into_bce_logits\.py:7"],
    ),
    "labels shuffled apart from their inputs": (
        ["classify.py", "shuffled_labels.py"],
        [
            r"WARNING learning watch: the train loss 'ce' has stayed at its chance level .* entropy of the frequencies "
            r"of the 'classes' labels .*Not decided yet: .*Next experiment: rerun with \+\+debug_synthetic_data True"
        ],
    ),
    "learning rate far too small": (
        ["classify.py", "tiny_lr.py"],
        [
            r"WARNING learning watch: the train loss is not decreasing.* updates are negligible.* the learning rate "
            r"1e-08 is far too small"
        ],
    ),
    "broadcasting loss": (
        ["regress.py", "broadcast_loss.py"],
        [
            r"WARNING .*mse_loss at .*broadcast_loss\.py:8 .* shape \[16, 1\] .* shape \[16\]; they broadcast to "
            r"\[16, 16\]"
        ],
    ),
    "backward() inside train_step": (
        ["classify.py", "backward_in_step.py"],
        [
            r"ERROR: train_step calls backward\(\) itself \(at .*backward_in_step\.py:8 in train_step: loss\.backward"
            r"\(\)\)\. The engine backpropagates"
        ],
    ),
    "loss over padded frames": (
        ["sequences.py", "unmasked_loss.py"],
        [r"WARNING .*the loss covers padding: changing only the padded frames of 'data' or 'classes'"],
    ),
    "view instead of transpose": (
        ["pooled.py", "view_for_transpose.py"],
        [
            r"WARNING .*sequences of a batch influence each other: the input of module 'rnn' \(GRU\) .* in the code "
            r"that calls 'rnn'"
        ],
    ),
    "softmax over the batch axis": (
        ["pooled.py", "softmax_over_batch.py"],
        [r"WARNING .*sequences of a batch influence each other: the input of module 'norm'"],
    ),
    "dev set copied from train": (
        ["classify.py", "dev_copy.py"],
        [
            r"WARNING .*1600 of the 1600 sequences of 'dev' \(100\.0%\) are exact copies of train sequences, e\.g\. "
            r"dev\[0\] = train\[0\]"
        ],
    ),
    "gradients not cleared": (
        ["classify.py", "stale_grads.py"],
        [
            r"WARNING .*gradients are not cleared between updates: module '0' \(Linear\): weight, bias.* "
            r"LoggingAdam\.zero_grad \(defined at .*stale_grads\.py:6\) does not clear them"
        ],
    ),
    "tensor created without a device": (
        ["classify.py", "cpu_noise.py"],
        [
            r"WARNING .*device bug in module \(model\): aten\.add at .*cpu_noise\.py:16 .* created by aten\.randn at "
            r".*cpu_noise\.py:15"
        ],
    ),
    "padding mask from the CPU lengths": (
        ["sequences.py", "cpu_lengths_mask.py"],
        [
            r"WARNING .*device bug in module \(train_step\): aten\.lt at .*cpu_lengths_mask\.py:10 .* created as "
            r"extern_data\['classes:seq_len'\], whose lengths stay on the CPU"
        ],
    ),
}

# bug class -> the start of the block of docs/health.rst that quotes what its run prints
DOCUMENTED = {
    "softmax into cross_entropy": "WARNING sanity check (first step): cross_entropy at tests/zoo/classify.py",
    "loss over padded frames": "WARNING sanity check (first step): the loss covers padding",
    "view instead of transpose": "WARNING sanity check (first step): sequences of a batch influence each other",
    "dev set copied from train": "WARNING sanity check (data): 1600 of the 1600 sequences",
    "tensor created without a device": "WARNING sanity check (first step): device bug in module (model)",
}

HEALTHY = {
    "classifier": ["classify.py"],
    "binary cross-entropy on logits": ["classify.py", "bce_logits.py"],
    "regression": ["regress.py"],
    "masked sequence labeller": ["sequences.py"],
    "time-major GRU with attention pooling and batch norm": ["pooled.py"],
}


@pytest.fixture(scope="module")
def runs():
    """Every zoo run, two at a time (each is single-threaded)."""
    cases = {**{f"bug: {k}": v[0] for k, v in BUGS.items()}, **{f"healthy: {k}": v for k, v in HEALTHY.items()}}

    def run(files):
        result = run_rnn(*(os.path.join(ZOO, f) for f in files), "++log_verbosity", "4", cwd=ROOT, timeout=300)
        return result.returncode, result.stdout + result.stderr

    with ThreadPoolExecutor(max_workers=2) as pool:
        return dict(zip(cases, pool.map(run, cases.values()), strict=True))


@pytest.mark.parametrize("name", list(BUGS))
def test_bug_is_named(runs, name):
    _, output = runs[f"bug: {name}"]
    for pattern in BUGS[name][1]:
        assert re.search(pattern, output), f"{name}: no match for {pattern!r} in:\n{output[-4000:]}"


@pytest.mark.parametrize("name", list(DOCUMENTED))
def test_the_docs_quote_what_the_bug_run_prints(runs, name):
    _, output = runs[f"bug: {name}"]
    assert_documented(output, "docs/health.rst", DOCUMENTED[name])


@pytest.mark.parametrize("name", list(HEALTHY))
def test_healthy_twin_is_quiet(runs, name):
    code, output = runs[f"healthy: {name}"]
    assert code == 0, output[-4000:]
    warnings = [line for line in output.splitlines() if "WARNING" in line or "Warning" in line]
    assert not warnings, f"{name}: " + "\n".join(warnings)
