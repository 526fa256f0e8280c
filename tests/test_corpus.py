"""The corpus of issue 49: real, publicly reported silent training bugs, each with its fixed twin, and healthy
setups of new kinds (tests/corpus/, measured by tools/measure-corpus.py).

These tests hold the corpus to its contract, not the framework's verdicts: the manifests are well-formed and their
split is the frozen rule; every bug runs and measurably hurts (its twin reaches a lower dev error); every healthy
setup runs. The default suite runs a sample (two bugs, one healthy setup); ``pytest -m corpus`` runs all of them.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import re
import sys

import pytest

from conftest import ROOT, run_rnn

_spec = importlib.util.spec_from_file_location("measure_corpus", os.path.join(ROOT, "tools", "measure-corpus.py"))
measure_corpus = sys.modules.setdefault("measure_corpus", importlib.util.module_from_spec(_spec))
_spec.loader.exec_module(measure_corpus)  # registered first: its dataclasses look their module up

CASES = measure_corpus.load_cases()
WRITTEN = [case for case in CASES if os.path.exists(case.config)]
SAMPLE_BUGS = ["dev_not_normalized", "schedule_in_epochs_stepped_per_step"]
SAMPLE_HEALTHY = ["quantile_regression"]
# Healthy setups the framework crashes on today (issue 49): strict, so that the fix makes the test fail until
# the entry is removed.
KNOWN_BREAKS: dict[str, str] = {}  # healthy setups the framework breaks on: id -> why (a strict xfail each)


def _split(name: str) -> str:
    return "dev" if int(hashlib.sha256(name.encode()).hexdigest()[-1], 16) % 2 == 0 else "heldout"


def test_manifests_hold_the_frozen_split_and_compilable_rules():
    bugs = [case for case in CASES if case.kind == "bug"]
    assert len({case.entry["project"] for case in bugs}) == len(bugs), "one bug per source project"
    for case in CASES:
        key = case.entry["project"] if case.kind == "bug" else case.id
        assert case.split == _split(key), f"{case.id}: split {case.split} is not the rule's {_split(key)}"
    for case in bugs:
        assert case.entry["url"].startswith("https://github.com/"), case.id
        assert case.entry["named"] and case.entry["place"], case.id
        for pattern in case.entry["named"] + case.entry["place"]:
            re.compile(pattern)


def _dev_error(result, case) -> float:
    assert result.returncode == 0, f"{case.id}: exit {result.returncode}\n{(result.stdout + result.stderr)[-3000:]}"
    error = measure_corpus._last_dev_error(result.stdout + result.stderr, case.entry.get("error_key", "err"))
    assert error is not None, f"{case.id}: no dev error in the output\n{result.stdout[-2000:]}"
    return error


def _check_bug(case, tmp_path):
    bug = run_rnn(case.config, "++model", repr(str(tmp_path / "bug" / "model")), cwd=str(tmp_path), timeout=300)
    twin = run_rnn(
        case.config, "++model", repr(str(tmp_path / "twin" / "model")), "++bug", "False", cwd=str(tmp_path), timeout=300
    )
    bug_error, twin_error = _dev_error(bug, case), _dev_error(twin, case)
    assert twin_error < bug_error, f"{case.id}: the twin's dev error {twin_error} is not below the bug's {bug_error}"


def _check_healthy(case, tmp_path):
    result = run_rnn(case.config, "++model", repr(str(tmp_path / "model")), cwd=str(tmp_path), timeout=300)
    assert result.returncode == 0, (result.stdout + result.stderr)[-3000:]


@pytest.mark.parametrize("name", SAMPLE_BUGS)
def test_a_sample_bug_hurts_against_its_twin(name, tmp_path):
    _check_bug(next(case for case in WRITTEN if case.id == name), tmp_path)


@pytest.mark.parametrize("name", SAMPLE_HEALTHY)
def test_a_sample_healthy_setup_runs(name, tmp_path):
    _check_healthy(next(case for case in WRITTEN if case.id == name), tmp_path)


@pytest.mark.corpus
@pytest.mark.parametrize("name", [case.id for case in WRITTEN if case.kind == "bug"])
def test_every_bug_hurts_against_its_twin(name, tmp_path):
    _check_bug(next(case for case in WRITTEN if case.id == name), tmp_path)


@pytest.mark.corpus
@pytest.mark.parametrize(
    "name",
    [
        pytest.param(case.id, marks=pytest.mark.xfail(strict=True, reason=KNOWN_BREAKS[case.id]))
        if case.id in KNOWN_BREAKS
        else case.id
        for case in WRITTEN
        if case.kind == "healthy"
    ],
)
def test_every_healthy_setup_runs(name, tmp_path):
    _check_healthy(next(case for case in WRITTEN if case.id == name), tmp_path)
