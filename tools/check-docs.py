#!/usr/bin/env python3
"""Run every command of README.rst and docs/*.rst in the order written, in a fresh copy of the
repository, and check the output the pages quote.

Pages are taken in reading order (README.rst, then docs/index.rst's table of contents). The copy
holds the files git tracks (plus new ones it does not ignore), so outputs of earlier runs in this
checkout do not leak in; commands run with ``bash`` in it, ``python`` being this interpreter.
A command passes when every line its page quotes matches a printed line (``...`` = any text,
numbers within a tolerance), or, when the page quotes nothing, when it exits 0. Output quoted in
prose (``:output:`...```) must be in what some command printed, once all have run, and the commands
must leave no file that git would list as untracked (outputs go to ignored directories). Output quoted
without its command (``.. doc-test: printed by tests/test_x.py``) is compared by that test, not here.
Commands marked
``.. doc-test: illustrative`` are listed, not run (see tools/devkit/doc_commands.py). With ``--fork``
(the test suite's choice), plain ``python SCRIPT ARGS`` commands (also after ``NAME=value`` words) run forked from an interpreter
that has imported torch, which saves some 5 s of imports per command, and such a training run draws no
``report.html`` unless its config or command sets ``report_html``, as the tests' runs (devkit's ``NO_PAGE``; the
arguments stay as written, since a run prints some back): the page is a process of about 2.5 s of CPU after the first
epoch and at the run's end, which no quoted line reads (tests/test_run_page.py and tests/test_run_record.py draw it).
Exit status: 0 all passed, 1 one failed, 2 bad usage.
"""

import argparse
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path[:0] = [ROOT, os.path.join(ROOT, "tools")]  # the framework, and the harness in tools/devkit

from devkit.doc_commands import Command, FileBlock, OutputBlock, extract, missing_lines, prose_quotes, unprinted_quotes  # noqa: E402
from devkit.preloaded import NO_PAGE, run_script  # noqa: E402

from framework.tool_args import ToolParser  # noqa: E402

PYTHONS = ("python", "python3", ".venv/bin/python")
HARNESS = (".venv", ".doc-test-bin")  # what this tool adds to the copy
SHELL_SYNTAX = re.compile(r"[|&;<>$`]")
ASSIGNMENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*=\S*")


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = ToolParser(
        __file__, __doc__, takes_config=False, usage_tail="[page.rst ...] [--list] [--keep DIR] [--fork]"
    )
    parser.add_argument("pages", nargs="*", help="pages to check (default: all, in reading order)")
    parser.add_argument("--list", action="store_true", help="list the commands without running them")
    parser.add_argument("--keep", metavar="DIR", help="make the fresh copy here and keep it (default: a temp dir)")
    parser.add_argument("--timeout", type=float, default=600, help="seconds per command (default: %(default)s)")
    parser.add_argument(
        "--fork",
        action="store_true",
        help="run plain 'python SCRIPT ARGS' commands forked from an interpreter that has imported torch "
        "(tools/devkit/preloaded.py): the same runs without 5 s of imports each, and without report.html unless "
        "they set report_html; the others still go to bash",
    )
    return parser.parse_tool_args(argv)


def reading_order() -> list[str]:
    """README.rst, then the pages of docs/index.rst's toctree."""
    pages, in_toctree = ["README.rst"], False
    with open(os.path.join(ROOT, "docs", "index.rst"), encoding="utf-8") as f:
        for line in f:
            if line.startswith(".. toctree::"):
                in_toctree = True
            elif in_toctree and line.strip() and not line.strip().startswith(":"):
                pages.append(f"docs/{line.strip()}.rst")
    return pages


def fresh_copy(directory: str) -> set[str]:
    """The repository's tracked and new, not ignored files, copied into ``directory``; their paths."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT,
        capture_output=True,
        check=True,
    ).stdout.decode()
    copied = set()
    for path in filter(None, listed.split("\0")):
        source = os.path.join(ROOT, path)
        if os.path.isfile(source):  # a file deleted but not yet committed is listed too
            os.makedirs(os.path.join(directory, os.path.dirname(path)), exist_ok=True)
            shutil.copy2(source, os.path.join(directory, path))
            copied.add(path)
    # README's demo runs .venv/bin/python after installing into it; here that is this interpreter.
    _interpreter_at(os.path.join(directory, ".venv", "bin", "python"))
    return copied


def left_behind(directory: str, expected: set[str]) -> list[str]:
    """Files the commands wrote into the copy that git would list as untracked: not ignored, not ``expected``."""
    created = []
    for base, dirs, files in os.walk(directory):
        if base == directory:
            dirs[:] = [d for d in dirs if d not in HARNESS]
        created += [os.path.relpath(os.path.join(base, f), directory) for f in files]
    created = sorted(set(created) - expected)
    ignored = subprocess.run(
        ["git", "check-ignore", "--no-index", "--stdin"],
        cwd=ROOT,
        input="\n".join(created),
        capture_output=True,
        text=True,
    ).stdout.split("\n")
    return sorted(set(created) - set(ignored))


def _interpreter_at(path: str) -> None:
    """A script at ``path`` that runs this interpreter (a symlink would lose its virtualenv)."""
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        f.write(f'#!/bin/sh\nexec {shlex.quote(sys.executable)} "$@"\n')
    os.chmod(path, 0o755)


def run(command: Command, directory: str, env: dict[str, str], timeout: float, fork: bool) -> tuple[bool, str, str]:
    """Run one command; whether it passed, if not why, and what it printed."""
    words = shlex.split(command.text)
    assignments = {}  # ``NAME=value python ...``: the command's environment
    while words and ASSIGNMENT.fullmatch(words[0]):
        name, value = words.pop(0).split("=", 1)
        assignments[name] = value
    forkable = (
        fork
        and len(words) > 1
        and words[0] in PYTHONS
        and not words[1].startswith("-")
        and not SHELL_SYNTAX.search(command.text)
    )
    try:
        if forkable:
            forked = run_script(
                os.path.join(directory, words[1]),
                *words[2:],
                cwd=directory,
                timeout=timeout,
                env={**env, **assignments, NO_PAGE: "1"},  # no report.html (see the docstring)
            )
            result = subprocess.CompletedProcess(words, forked.returncode, forked.stdout + forked.stderr)
        else:
            result = subprocess.run(
                ["bash", "-c", command.text],
                cwd=directory,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
                timeout=timeout,
            )
    except subprocess.TimeoutExpired:
        return False, f"did not finish in {timeout:g} s", ""
    tail = "\n".join(result.stdout.splitlines()[-30:])
    if command.expected:
        missing = missing_lines(command.expected, result.stdout)
        if missing:
            quoted = "\n".join(f"    {line}" for line in missing)
            return (
                False,
                f"exit {result.returncode}; quoted lines not printed:\n{quoted}\n  output (tail):\n{tail}",
                result.stdout,
            )
        return True, "", result.stdout
    if result.returncode != 0:
        return (
            False,
            f"exit {result.returncode} (the page quotes no output, so it must succeed); output (tail):\n{tail}",
            result.stdout,
        )
    return True, "", result.stdout


def main(args: argparse.Namespace) -> int:
    pages = args.pages or reading_order()
    commands, quotes = [], []
    for page in pages:
        with open(os.path.join(ROOT, page), encoding="utf-8") as f:
            text = f.read()
        commands += extract(page, text)
        quotes += prose_quotes(page, text)
    if args.list:
        for command in commands:
            if isinstance(command, FileBlock):
                print(f"{command.page}:{command.line}: (writes {command.path})")
                continue
            if isinstance(command, OutputBlock):
                print(f"{command.where}: (output printed by {command.test or 'nothing that checks it'})")
                continue
            note = f"  [illustrative: {command.illustrative}]" if command.illustrative else ""
            print(f"{command.where}: {command.text}{note}")
        for quote in quotes:
            print(f"{quote.where}: (prose quotes {quote.text!r})")
        return 0
    directory = args.keep or tempfile.mkdtemp(prefix="check-docs-")
    os.makedirs(directory, exist_ok=True)
    copied = fresh_copy(directory)
    bin_dir = os.path.join(directory, ".doc-test-bin")
    for name in ("python", "python3"):
        _interpreter_at(os.path.join(bin_dir, name))
    env = {**os.environ, "PATH": bin_dir + os.pathsep + os.environ.get("PATH", "")}
    passed = failed = 0
    outputs: list[str] = []
    try:
        for command in commands:
            if isinstance(command, OutputBlock):
                continue  # its test compares it (tests/test_doc_commands.py checks that one does)
            if isinstance(command, FileBlock):
                with open(os.path.join(directory, command.path), "w", encoding="utf-8") as f:
                    f.write(command.content)
                continue
            if command.illustrative:
                print(f"SKIP {command.where}: {command.text}  [illustrative: {command.illustrative}]", flush=True)
                continue
            start = time.perf_counter()
            ok, why, printed = run(command, directory, env, args.timeout, args.fork)
            outputs.append(printed)
            seconds = time.perf_counter() - start
            passed, failed = passed + ok, failed + (not ok)
            print(f"{'PASS' if ok else 'FAIL'} {command.where} ({seconds:.1f} s): {command.text}", flush=True)
            if not ok:
                print(f"  {why}", flush=True)
        written = {c.path for c in commands if isinstance(c, FileBlock)}  # the pages have the reader write these
        stray = left_behind(directory, copied | written)
        for path in stray:
            print(f"FAIL {path}: written by the commands, and git does not ignore it", flush=True)
    finally:
        if not args.keep:
            shutil.rmtree(directory, ignore_errors=True)
    unprinted = unprinted_quotes(quotes, outputs)
    for quote in unprinted:
        print(f"FAIL {quote.where}: the prose quotes :output:`{quote.text}`, which no command printed", flush=True)
    total = sum(isinstance(c, Command) for c in commands)
    skipped = total - passed - failed
    print(
        f"{total} commands: {passed + failed} run, {passed} passed, {failed} failed, {skipped} illustrative; "
        f"{len(quotes)} quotes in prose, {len(unprinted)} not printed; {len(stray)} files git does not ignore"
    )
    return 1 if failed or unprinted or stray else 0


if __name__ == "__main__":
    sys.exit(main(parse_args(sys.argv[1:])))
