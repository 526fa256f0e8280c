"""A sequence's result must not depend on its batch-mates (issue 49): the padding check's run with more padding.

When other padding values move the loss and the model's outputs on the real frames, the padding check runs the
first batch once more with as many padded frames again after every sequence (padded as the data is, as a longer
batch-mate brings). Outputs that change then, with the loss, are a warning naming where the padding enters (the
first module whose outputs on the real frames change); outputs that stay (a convolution over zero padding, a
unidirectional RNN) are not; a bidirectional RNN over zero padding (its loss barely moves, the healthy corpus's CTC
recognizer) or a convolution over padded embeddings (a few frames at the ends move), widespread choices, are a
note. Each bug is written the way its community writes it, each with a healthy twin; real Engine runs of
tests/zoo configs on the 12AX tagger (sequences.py), in process.
"""

from __future__ import annotations

import os
import re

import pytest
from devkit.doc_commands import assert_documented

from conftest import ROOT
from framework.assembly import Engine
from framework.base import findings
from framework.base.config import load_config

ZOO = os.path.join(ROOT, "tests", "zoo")
DEPENDS = (
    r"WARNING sanity check \(first step\): a sequence's result depends on its batch-mates: with \d+ more padded "
    r"frames after the real frames of 'data' .* the model's output changes on the real frames by up to \S+ .*the "
    r"padding enters at {module}: the first module, in the order they run, whose outputs on the real frames change.*"
    r"and the loss with it \(ce \S+ -> \S+;"
)

BUGS = {
    "per-sequence mean normalisation over the padded frames": ("padding_mean_norm.py", r"'lstm' \(LSTM\)"),
    "self-attention without key_padding_mask": ("padding_attention.py", r"'attention' \(MultiheadAttention\)"),
}
HEALTHY = {
    "unidirectional LSTM tagger": [],
    "self-attention given key_padding_mask": ["padding_attention.py", "padding_attention_masked.py"],
    "per-sequence mean over the real frames": ["padding_mean_norm.py", "padding_mean_norm_masked.py"],
}


def _train(files: list[str]) -> None:
    config = load_config([os.path.join(ZOO, f) for f in ["sequences.py", *files]], {"model": None})
    Engine(config).run("train")


@pytest.mark.parametrize("name", list(BUGS))
def test_a_result_that_depends_on_the_amount_of_padding_is_a_warning_where_it_enters(output, name):
    config, module = BUGS[name]
    _train([config])
    text = output()
    assert re.search(DEPENDS.format(module=module), text), f"{name}:\n{text[-3000:]}"
    if config == "padding_attention.py":
        assert_documented(
            text, "docs/health.rst", "WARNING sanity check (first step): a sequence's result depends on its batch-mates"
        )


@pytest.mark.parametrize("name", list(HEALTHY))
def test_a_model_that_masks_its_padding_gets_no_warning(output, name):
    _train(HEALTHY[name])
    text = output()
    assert "Epoch 1 train" in text and [line for line in text.splitlines() if "WARNING" in line] == [], name


def test_a_bidirectional_rnn_over_zero_padding_whose_loss_barely_moves_is_a_note(output):
    seen: list[findings.Finding] = []
    findings.add_sink(seen.append)
    try:
        _train(["padding_bilstm.py"])
    finally:
        findings.remove_sink(seen.append)
    assert [line for line in output().splitlines() if "WARNING" in line] == []
    notes = [f.message for f in seen if f.severity == "note" and "how much padding follows" in f.message]
    assert (
        len(notes) == 1
        and "the padding enters at 'lstm' (LSTM)" in notes[0]
        and "At most 50% of the frames moved" in notes[0]
    )
