"""The run summary's lines are whole sentences (issue 51, item 2): the cause a summary shows of a finding is its
message's first sentence, cut at a sentence end, never inside a word, a parenthesis or after "e.g.".
"""

from __future__ import annotations

import re

import pytest

from framework.base.findings import Finding, first_sentence
from framework.core.run_summary import summary_block

# Message openings as the checks write them (the split-overlap, loss-input, target-leakage and withdrawal wordings).
MESSAGES = {
    "an example after e.g.": (
        "12 of the 400 sequences of 'dev' (3.0%) are exact copies of train sequences, e.g. dev[4] = train[17], "
        "dev[9] = train[2]. The dev score then measures memorization.",
        "12 of the 400 sequences of 'dev' (3.0%) are exact copies of train sequences, e.g. dev[4] = train[17], "
        "dev[9] = train[2].",
    ),
    "a full stop inside parentheses": (
        "mse_loss at cfg.py:31 compares shapes [8, 1] and [8] (they broadcast. Every prediction meets every "
        "target) so the loss is wrong. Give both the same shape.",
        "mse_loss at cfg.py:31 compares shapes [8, 1] and [8] (they broadcast. Every prediction meets every "
        "target) so the loss is wrong.",
    ),
    "numbers, paths and file names": (
        "module 'enc.1' (Linear) at configs/x.py:12 changed by 1e-3. Lower the rate 0.5.",
        "module 'enc.1' (Linear) at configs/x.py:12 changed by 1e-3.",
    ),
    "a question": (
        "key 'classes': class 3 occurs in train but never in dev. Was the split made by label? The dev score...",
        "key 'classes': class 3 occurs in train but never in dev.",
    ),
    "no sentence end on the first line": (
        "3 updates in a row were skipped (scale now 2):\nthe replay names module 'head'",
        "3 updates in a row were skipped (scale now 2):",
    ),
}


@pytest.mark.parametrize("name", list(MESSAGES))
def test_the_cause_is_the_first_whole_sentence(name):
    message, cause = MESSAGES[name]
    assert first_sentence(message) == cause
    assert Finding("warning", "c", message).cause() == cause


def test_the_summary_shows_each_cause_as_a_whole_sentence():
    found = [
        Finding("warning", f"check {i}", message, epoch=1, step=10 * i)
        for i, (message, _) in enumerate(MESSAGES.values())
    ]
    block = summary_block(
        task="train",
        ended="completed",
        epoch=1,
        num_epochs=1,
        global_step=50,
        seconds=3.0,
        scores={},
        found=found,
        files={},
    )
    lines = [line for line in block.splitlines() if line.startswith("    check ")]
    assert len(lines) == len(MESSAGES)
    for line, finding, (_, cause) in zip(lines, found, MESSAGES.values(), strict=True):
        shown = line.split(": ", 2)[2]
        assert shown == cause, line
        rest = finding.message[len(shown) :]
        # Whole: the message goes on after a space or a line break (no word cut), or it ends here.
        assert finding.message.startswith(shown) and (rest == "" or re.match(r"\s", rest)), line
