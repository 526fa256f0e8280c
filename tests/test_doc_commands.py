"""Every command of README.rst and docs/*.rst runs as written, in order, in a fresh copy, and prints what the page quotes."""

import importlib.util
import os
import re
import subprocess
import sys

import pytest
from devkit.doc_commands import (
    Command,
    FileBlock,
    OutputBlock,
    extract,
    missing_lines,
    prose_quotes,
    unchecked_output,
    unprinted_quotes,
)

from conftest import ROOT

PAGE = """Intro::

    $ python rnn.py a.py ++x 1
    Epoch 1 train: ce 1.046 fer 0.265, 63 steps, 0.3 sec, lr 0.001
    Saved ... model.001.pt

.. doc-test: illustrative (a placeholder)

Plain::

    python rnn.py config.py        # a comment
    ipython --pdb rnn.py config.py

.. doc-test: last step

Install::

    python3 -m venv .venv && .venv/bin/python rnn.py b.py --rule 'a#b'

A file::

    # my_config.py
    batch_size = 4

Code, not a command::

    import torch
"""


def test_commands_files_markers_and_quoted_lines_are_extracted_in_order():
    steps = extract("page.rst", PAGE)
    assert [type(s) for s in steps] == [Command, Command, Command, Command, FileBlock]
    first, plain, interactive, install, file = steps
    assert (first.text, first.line, first.illustrative) == ("python rnn.py a.py ++x 1", 3, None)
    assert first.expected == [
        "Epoch 1 train: ce 1.046 fer 0.265, 63 steps, 0.3 sec, lr 0.001",
        "Saved ... model.001.pt",
    ]
    assert plain.text == "python rnn.py config.py" and plain.illustrative == "a placeholder"
    assert interactive.illustrative == "a placeholder"
    assert install.text == ".venv/bin/python rnn.py b.py --rule 'a#b'" and install.illustrative is None
    assert (file.path, file.content) == ("my_config.py", "# my_config.py\nbatch_size = 4\n")


def test_quoted_lines_match_loosely_but_not_anything():
    quoted = ["Epoch 1 train: ce 1.046 fer 0.265, 63 steps, 0.3 sec, lr 0.001", "Saved ... model.001.pt"]
    printed = (
        "noise\nEpoch 1 train: ce 1.05 fer 0.266, 63 steps, 0.31 sec, lr 0.001\nSaved checkpoint out/model.001.pt\n"
    )
    assert missing_lines(quoted, printed) == []
    # a different count, a number far off, another word: each is reported
    assert missing_lines(quoted[:1], printed.replace("63 steps", "64 steps")) == quoted[:1]
    assert missing_lines(quoted[:1], printed.replace("ce 1.05", "ce 2.05")) == quoted[:1]
    assert missing_lines(quoted[1:], printed.replace("Saved", "Loaded")) == quoted[1:]
    assert missing_lines(["ERROR: x"], "WARNING: x") == ["ERROR: x"]


def test_output_quoted_in_prose_must_be_printed_by_some_command():
    page = "Intro.\n\nAfter 10 epochs: :output:`recon 97.165 kl 5.667`, and :output:`fer 0.06` at the end.\n"
    quotes = prose_quotes("page.rst", page)
    assert [(q.line, q.text) for q in quotes] == [(3, "recon 97.165 kl 5.667"), (3, "fer 0.06")]
    outputs = ["Epoch 9 evaluation: dev: recon 120.0 kl 19.0", "Epoch 10 evaluation: dev: recon 97.18 kl 5.69 (best)"]
    assert unprinted_quotes(quotes, outputs) == [quotes[1]]  # a fragment of a line, numbers within tolerance
    assert unprinted_quotes(quotes, [*outputs, "dev: ce 0.21 fer 0.061"]) == []
    assert unprinted_quotes(quotes[:1], ["Epoch 10 evaluation: dev: recon 97.165 kl 6.5"]) == quotes[:1]


def test_output_quoted_without_its_command_is_compared_by_the_test_the_page_names():
    page = (
        "A bug::\n\n    WARNING x: y 1.5 ...\n\n.. doc-test: printed by tests/test_a.py\n\n"
        "Another::\n\n    WARNING zoo check: w 2\n"
    )
    unmarked, marked = extract("docs/p.rst", page)
    assert isinstance(unmarked, OutputBlock) and (unmarked.test, unmarked.lines) == (None, ["WARNING x: y 1.5 ..."])
    assert (marked.test, marked.line) == ("tests/test_a.py", 9)
    comparing = 'assert_documented(output(), "docs/p.rst", "WARNING zoo check:")'
    assert unchecked_output([unmarked, marked], {"tests/test_a.py": comparing}) == [unmarked]
    assert unchecked_output([marked], {"tests/test_a.py": comparing.replace("p.rst", "q.rst")}) == [marked]
    assert unchecked_output([marked], {"tests/test_a.py": comparing.replace("zoo", "zap")}) == [marked]


def test_every_block_of_output_in_the_docs_is_compared_by_a_test():
    blocks = []
    for page in ["README.rst", *(f"docs/{name}" for name in sorted(os.listdir(os.path.join(ROOT, "docs"))))]:
        if page.endswith(".rst"):
            with open(os.path.join(ROOT, page), encoding="utf-8") as f:
                blocks += [b for b in extract(page, f.read()) if isinstance(b, OutputBlock)]
    tests = {}
    for block in blocks:
        if block.test and os.path.isfile(os.path.join(ROOT, block.test)):
            with open(os.path.join(ROOT, block.test), encoding="utf-8") as f:
                tests[block.test] = f.read()
    unchecked = unchecked_output(blocks, tests)
    assert not unchecked, "output no test compares (mark it '.. doc-test: printed by tests/X.py' and call "
    "assert_documented there): " + ", ".join(f"{b.where} {b.lines[0][:60]!r}" for b in unchecked)


# The pages whose commands tests/test_doc_commands_walkthroughs.py runs, in a fresh copy of their own, so that the
# docs' commands (minutes of runs) go to both workers of the suite: docs/health.rst quotes what walkthrough_vae.rst's
# commands print, so the two go together; no page here uses what another page's commands write, and none of the
# other pages uses theirs. Every other page is checked here, a new one too.
WALKTHROUGHS = ("docs/health.rst", "docs/accelerators.rst", "docs/walkthrough_vae.rst", "docs/options.rst")


def reading_order() -> list[str]:
    """The pages in tools/check-docs.py's order: README.rst, then docs/index.rst's table of contents."""
    spec = importlib.util.spec_from_file_location("check_docs", os.path.join(ROOT, "tools", "check-docs.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.reading_order()


def check_pages(pages: list[str]) -> tuple[int, int]:
    """Run ``tools/check-docs.py --fork PAGES`` (in order, in a fresh copy); assert that every command it ran passed,
    that every quote in their prose was printed and that no file was left behind; return how many commands ran and how
    many quotes the prose has."""
    result = subprocess.run(
        [sys.executable, os.path.join(ROOT, "tools", "check-docs.py"), "--fork", *pages],
        capture_output=True,
        text=True,
        timeout=900,
        stdin=subprocess.DEVNULL,
    )
    summary = result.stdout.strip().splitlines()[-1]
    assert result.returncode == 0, result.stdout[-6000:] + result.stderr[-2000:]
    total, run, passed, failed, illustrative, quotes, unprinted, stray = map(int, re.findall(r"\d+", summary))
    assert failed == 0 and passed == run and run + illustrative == total, summary
    assert unprinted == 0 and stray == 0, summary
    return run, quotes


def test_the_pages_of_the_walkthroughs_file_are_pages_of_the_docs():
    assert set(WALKTHROUGHS) <= set(reading_order())  # else one would be checked nowhere


@pytest.mark.slow
def test_every_documented_command_runs_and_prints_what_the_docs_quote():
    run, quotes = check_pages([page for page in reading_order() if page not in WALKTHROUGHS])
    assert run >= 15 and quotes >= 4  # with test_doc_commands_walkthroughs.py's: at least 20 commands and 8 quotes
