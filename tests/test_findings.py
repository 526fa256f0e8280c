"""The Finding record and its reporter: one log line, every sink gets the same record."""

from __future__ import annotations

import pytest

from framework.findings import Finding, add_sink, remove_sink, report


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
