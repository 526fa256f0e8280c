"""Silent training bugs from real reports (issue 28): target leakage and update integrity.

Each bug is written the way users write it (``tests/zoo/silent_*.py`` layered on a healthy base,
including Hugging Face GPT-2) and must be named, with default options, in the first epoch; each
healthy twin must print no WARNING line. Each run is a real Engine run of the config, in process,
for one epoch.
"""

from __future__ import annotations

import os
import re

import pytest
import torch
from devkit.doc_commands import assert_documented

from conftest import ROOT, captured_log
from framework.assembly import Engine
from framework.base.config import load_config
from framework.debug.accumulation_check import merge_batches
from framework.debug.target_leakage import align

ZOO = os.path.join(ROOT, "tests", "zoo")
FIRST = r"WARNING sanity check \(first step\): "

# bug -> (config files, the line that must be printed)
BUGS = {
    "leakage: labels not shifted (LSTM language model)": (
        ["silent_lm.py", "silent_lm_unshifted.py"],
        FIRST + r"target leakage: cross_entropy at .*silent_lm_unshifted\.py:10 .* against token t of 'data', and that "
        r"prediction reads the input at the target's own position .*module 'embed'.* The labels are not shifted",
    ),
    "leakage: a bidirectional LSTM as a language model": (
        ["silent_lm.py", "silent_lm_bidirectional.py"],
        FIRST + r"target leakage: .* against token t\+1 of 'data', and that prediction reads the input at the "
        r"target's own position .* The model sees the future",
    ),
    "leakage: a transformer language model without a causal mask": (
        ["silent_lm.py", "silent_lm_transformer.py", "silent_lm_transformer_no_mask.py"],
        FIRST + r"target leakage: cross_entropy at .*silent_lm_transformer\.py:\d+ .* token t\+1 of 'data'.* The model "
        r"sees the future: mask attention causally",
    ),
    "leakage: GPT-2's logits scored against the unshifted input ids": (
        ["lib_gpt2.py", "silent_gpt2_unshifted_loss.py"],
        FIRST + r"target leakage: cross_entropy at .*silent_gpt2_unshifted_loss\.py:10 .* module 'transformer\.wte'.* "
        r"The labels are not shifted",
    ),
    "misalignment: labels shifted by hand and again by GPT2LMHeadModel": (
        ["lib_gpt2.py", "silent_gpt2_labels_shifted_twice.py"],
        FIRST + r"targets misaligned: cross_entropy at .*lib_gpt2\.py:\d+ .* against token t\+2 of 'data', but that "
        r"prediction reads the input only up to position t .* must guess 2 tokens ahead",
    ),
    "accumulation: a loss averaged over each batch's own frames": (
        ["sequences.py", "silent_accum_token_mean.py"],
        r"WARNING accumulation check: the accumulated gradient of the first window \(4 batches.* weights each batch "
        r"by its share of the window's frames of 'data' .* the engine by its share of the window's sequences",
    ),
    "unregistered: hidden layers in a plain list": (
        ["classify.py", "silent_plain_list.py"],
        FIRST + r"the step uses 4 tensor\(s\) that require grad but are not parameters of the model .* held in the "
        r"plain list 'hidden' of module '\(model\)' \(Net\), used .* at .*silent_plain_list\.py:16",
    ),
    "unregistered: a tensor with requires_grad=True instead of nn.Parameter": (
        ["classify.py", "silent_tensor_attribute.py"],
        FIRST + r"the step uses 1 tensor\(s\) .* held in the plain tensor attribute 'scale' of module '\(model\)'",
    ),
    "optimizer: built over another copy of the network": (
        ["classify.py", "silent_optimizer_other_copy.py"],
        FIRST + r"the optimizer updates 4 tensor\(s\) that are not parameters of the model",
    ),
    "optimizer: a parameter listed twice": (
        ["classify.py", "silent_optimizer_param_twice.py"],
        FIRST + r"module '2' \(Linear\): weight, bias are listed more than once in the optimizer's param groups",
    ),
    "updates: an optimizer that accumulates on its own": (
        ["classify.py", "silent_self_accumulating_optimizer.py"],
        r"WARNING update integrity: the first update changed no parameter.* AccumulatingAdam\.step\(\) \(its step\(\) "
        r"is defined at .*silent_self_accumulating_optimizer\.py:11\)",
    ),
}

# bug -> the start of the block of docs/health.rst that quotes what its run prints
DOCUMENTED = {
    "leakage: labels not shifted (LSTM language model)": "WARNING sanity check (first step): target leakage",
    "accumulation: a loss averaged over each batch's own frames": "WARNING accumulation check: the accumulated",
}

HEALTHY = {
    "LSTM language model, shifted targets": ["silent_lm.py"],
    "transformer language model with a causal mask": ["silent_lm.py", "silent_lm_transformer.py"],
    "Hugging Face GPT2LMHeadModel with labels=input_ids": ["lib_gpt2.py"],
    "Hugging Face BertForMaskedLM, 15% of the tokens masked": ["lib_gpt2.py", "silent_bert_mlm.py"],
    "Hugging Face T5 copying its input (an encoder-decoder)": ["lib_gpt2.py", "silent_t5_copy.py"],
    "accumulation of a per-frame loss": ["sequences.py", "silent_accum_frame_sum.py"],
    "hidden layers in nn.ModuleList": ["classify.py", "silent_module_list.py"],
    "sequence tagger (targets from their own key)": ["sequences.py"],
}


@pytest.fixture
def output():
    """Log at verbosity 5; return what was logged."""
    with captured_log(5) as lines:
        yield lambda: "\n".join(lines)


def _train(files: list[str]) -> None:
    """One epoch; a base with thousands of sequences trains on a few hundred (the checks judge the first updates)."""
    paths = [os.path.join(ZOO, f) for f in files]
    overrides = {"model": None, "num_epochs": 1}
    train = load_config(paths).get("train")
    if isinstance(train, dict) and train.get("num_seqs", 0) > 400:
        overrides["train"] = {**train, "num_seqs": 400}
    Engine(load_config(paths, overrides)).run("train")


@pytest.mark.slow
@pytest.mark.parametrize("name", list(BUGS))
def test_the_silent_bug_is_named(output, name):
    files, pattern = BUGS[name]
    _train(files)
    assert re.search(pattern, output()), f"{name}: no match for {pattern!r} in:\n{output()[-4000:]}"
    if name in DOCUMENTED:
        assert_documented(output(), "docs/health.rst", DOCUMENTED[name])


@pytest.mark.slow
@pytest.mark.parametrize("name", list(HEALTHY))
def test_the_healthy_twin_is_quiet(output, name):
    _train(HEALTHY[name])
    text = output()
    assert [line for line in text.splitlines() if "WARNING" in line] == [], name


def test_targets_are_aligned_with_their_key_in_every_usual_layout():
    tokens = torch.tensor([[5, 6, 7, 8, 9, 10, 11, 12], [13, 14, 15, 16, 17, 0, 0, 0]])
    batch = {"data": tokens, "data:seq_len": torch.tensor([8, 5])}
    real = torch.arange(8)[None, :] < batch["data:seq_len"][:, None]
    shifted = tokens[:, 1:].masked_fill(~real[:, 1:], -100)
    cases = {
        "[B, T-1] flattened, one ahead": (shifted.reshape(-1), 1),
        "time-major flattened": (shifted.t().reshape(-1), 1),
        "real frames only, unshifted": (tokens[real], 0),
        "real frames of tokens[:, 1:]": (tokens[:, 1:][real[:, 1:]], 1),
    }
    for name, (target, offset) in cases.items():
        found = align(target, batch, "data", [])
        assert found is not None and found.offset == offset, name
    assert align(torch.randint(0, 30, (16,)), batch, "data", []) is None
    tagged = {**batch, "classes": tokens.clone(), "classes:seq_len": batch["data:seq_len"]}
    assert align(tokens[real], tagged, "data", ["classes"]) is None  # a dataset key provides them: not judged


def test_a_window_of_variable_length_batches_merges_into_one_padded_batch():
    first = {"data": torch.ones(2, 3, 4), "data:seq_len": torch.tensor([3, 2]), "id": torch.tensor([0, 1])}
    second = {"data": torch.ones(1, 5, 4), "data:seq_len": torch.tensor([5]), "id": torch.tensor([2])}
    merged = merge_batches([first, second])
    assert merged["data"].shape == (3, 5, 4) and merged["data"][:2, 3:].abs().sum() == 0
    assert merged["data:seq_len"].tolist() == [3, 2, 5] and merged["id"].tolist() == [0, 1, 2]
