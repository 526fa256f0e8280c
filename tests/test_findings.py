"""The Finding record and its reporter: one log line, every sink gets the same record."""

from __future__ import annotations

import pytest

from framework.base.findings import Finding, add_sink, remove_sink, report


def test_report_logs_one_line_and_feeds_sinks(output):
    got = []
    add_sink(got.append)
    try:
        finding = report(Finding("warning", "learning watch", "the loss is stuck.", evidence={"loss": 2.3}, step=7))
    finally:
        remove_sink(got.append)
    assert got == [finding]
    assert "WARNING learning watch: the loss is stuck." in output()
    assert finding.as_dict()["evidence"] == {"loss": 2.3}


def test_unknown_severity_is_refused():
    with pytest.raises(ValueError, match="severity"):
        Finding("fatal", "x", "y")


def test_a_withdrawn_finding_is_kept_and_shown_withdrawn_not_counted(output):
    from framework.base.findings import standing, withdraw, withdrawals
    from framework.core.run_summary import summary_block

    got = []
    add_sink(got.append)
    try:
        judged = report(Finding("warning", "learning watch", "the loss sits at chance.", epoch=1, step=60))
        kept = report(Finding("note", "sanity check", "a fact."))
        withdrawal = withdraw(judged, "by epoch 2 the loss left its chance level.")
    finally:
        remove_sink(got.append)
    assert got == [judged, kept, withdrawal]  # the record stays; a later one withdraws it
    assert judged.id and withdrawal.withdraws == judged.id and withdrawal.as_dict()["withdraws"] == judged.id
    assert standing(got) == [kept] and withdrawals(got) == [withdrawal]
    assert "Note learning watch: withdrawn the warning of epoch 1, step 60: by epoch 2 the loss left" in output()
    block = summary_block(
        task="train", ended="completed", epoch=2, num_epochs=2, global_step=120, seconds=1.0, scores={}, found=got,
        files={},
    )  # fmt: skip
    assert "  findings: 1 note, 1 withdrawn\n" in block and "1 warning" not in block
    assert "    learning watch: withdrawn the warning of epoch 1, step 60: by epoch 2 the loss left its chance" in block
