"""One problem, one record (issue 51, item 2): findings of two checks that name the same problem
(``evidence["problem"]``) are folded into the first one found.

The later record is still logged and written (``same_as`` the first's id); the first lists the later check in
``evidence["also_reported_by"]``; ``standing`` (the summary, the fail level) and the run page count the problem once.
Real runs: the GAN with its discriminator's loss marked for the generator (as tests/test_several_optimizers.py
plants it: the sanity check and the gradient health both name the optimizer no loss is marked for), and the corpus
bug whose step decay reaches ~0 (tests/corpus/bugs.toml: the schedule plan before the run and the learning watch's
"updates are negligible" from the curve).
"""

from __future__ import annotations

import json
import os

import pytest

from conftest import ROOT, run_rnn, write_config
from framework.base import findings
from framework.base.findings import Finding, standing

GAN = os.path.join(ROOT, "configs", "gan_ring.py")
STEP_DECAY = os.path.join(ROOT, "tests", "corpus", "bugs", "step_decay_uses_target_rate_as_factor.py")


def _reported(*found: Finding) -> list[Finding]:
    """Report ``found`` within a run (a clock is set, as a run's RunFindings sets it); the records as reported."""
    seen: list[Finding] = []
    findings.add_sink(seen.append)
    findings.set_clock(lambda: (1, 7))
    try:
        for finding in found:
            findings.report(finding)
    finally:
        findings.set_clock(None)
        findings.remove_sink(seen.append)
    return seen


def test_a_later_finding_of_the_same_problem_is_folded_into_the_first():
    first, other, later = _reported(
        Finding("warning", "sanity check", "a", evidence={"problem": "p"}, fix="Do a."),
        Finding("warning", "sanity check", "b", evidence={"problem": "q"}, fix="Do b."),
        Finding("warning", "gradient health", "c", evidence={"problem": "p"}, fix="Do c."),
    )
    assert later.same_as == first.id and not first.same_as and not other.same_as
    assert first.evidence["also_reported_by"] == ["gradient health"]
    assert standing([first, other, later]) == [first, other]


def test_a_folded_finding_stands_when_the_first_is_withdrawn():
    first, later = _reported(
        Finding("warning", "learning watch", "a", evidence={"problem": "p"}, fix="Do a."),
        Finding("warning", "diagnosis", "b", evidence={"problem": "p"}, fix="Do b."),
    )
    withdrawal = Finding("note", "learning watch", "withdrawn", withdraws=first.id)
    assert standing([first, later, withdrawal]) == [later]


def test_findings_are_folded_within_one_run_only():
    (first,) = _reported(Finding("warning", "sanity check", "a", evidence={"problem": "p"}, fix="Do a."))
    (again,) = _reported(Finding("warning", "sanity check", "a", evidence={"problem": "p"}, fix="Do a."))
    assert not again.same_as  # the next run's first record of it, not folded into the last run's
    outside = findings.report(Finding("warning", "x", "y", evidence={"problem": "p"}, fix="Do y."))
    assert not outside.same_as  # no run (no clock): nothing to fold into


def _records(directory: str) -> list[dict]:
    with open(os.path.join(directory, "findings.jsonl"), encoding="utf-8") as f:
        return [json.loads(line) for line in f]


def _summary(stdout: str) -> list[str]:
    return stdout[stdout.index("Run summary:") :].splitlines()


@pytest.mark.slow  # an epoch of the GAN and its page
def test_an_optimizer_no_loss_is_marked_for_is_one_record(tmp_path):
    with open(GAN, encoding="utf-8") as f:
        text = f.read()
    old = '"d", optimizer="discriminator")'
    assert old in text
    config = write_config(tmp_path, text.replace(old, '"d", optimizer="generator")'))
    model = tmp_path / "run"
    run = run_rnn(config, "++model", str(model / "m"), "++num_epochs", "1")
    assert run.returncode == 0, run.stderr
    problem = "no loss marked for optimizer 'discriminator'"
    records = [r for r in _records(str(model)) if r["evidence"].get("problem") == problem]
    assert [r["check"] for r in records] == ["sanity check (first 9 updates)", "gradient health"]
    first, later = records
    assert later["same_as"] == first["id"] and not first["same_as"]
    assert first["evidence"] and first["where"]["modules"] and "optimizer='discriminator'" in first["fix"]
    # Each check still says what it saw when it saw it; the summary names the problem once, with both checks.
    assert "WARNING gradient health: module 'discriminator.0'" in run.stdout
    summary = _summary(run.stdout)
    assert not [line for line in summary if line.startswith("    gradient health:")]
    (line,) = [line for line in summary if line.startswith("    sanity check (first 9 updates):")]
    assert "1 warning;" in line and line.endswith("(also reported by: gradient health)")
    from framework.run_report import render  # matplotlib: imported by the one test that draws, not at collection

    page = render(str(model))
    assert page.count("no loss was marked for it") == 1 and "also reported by: gradient health" in page


def test_a_schedule_that_stops_the_updates_is_one_record(tmp_path):
    run = run_rnn(STEP_DECAY, "++model", str(tmp_path / "m"), "++log", "None", timeout=300)
    assert run.returncode == 0, run.stderr
    records = [r for r in _records(str(tmp_path)) if r["severity"] != "note"]
    assert [r["check"] for r in records] == ["schedule plan", "learning watch"]
    plan, watch = records
    assert "The updates are negligible" in watch["message"] and watch["same_as"] == plan["id"]
    assert plan["evidence"]["problem"] == watch["evidence"]["problem"]
    summary = _summary(run.stdout)
    assert "  findings: 1 warning" in summary
    assert not [line for line in summary if line.startswith("    learning watch:")]
    (line,) = [line for line in summary if line.startswith("    schedule plan:")]
    assert line.endswith("(also reported by: learning watch)")
