"""The shell commands that README.rst and docs/*.rst tell users to run, and the output they quote.

A page's literal blocks (``::`` paragraphs and ``.. code-block:: bash``) hold commands in two
forms: a shell session (``$ command`` followed by the lines it prints) or plain command lines
(``python rnn.py ...``, a trailing ``# comment`` allowed). A block whose first line is a comment
naming a file (``# my_config.py``) is that file: later commands of the page use it. An RST comment
before a block changes how it is run (comments do not show in the rendered page)::

    .. doc-test: illustrative (why)   the block's commands are not run (placeholders, GPUs, ...)
    .. doc-test: last step            only the part after the last ``&&`` is run (install, then demo)
    .. doc-test: printed by tests/test_x.py   the block is output of a run that test makes

A block marked ``printed by`` holds output without its command (a bug of ``tests/zoo/``, a model
built in a test): the named test runs it and compares, with ``assert_documented(output, page,
first words)`` (the same loose match as a command's quoted output). A block of output that is
neither a command's nor marked is an error (``unchecked_output``), so no quote goes untested.

Quoted output is compared loosely: each quoted line must match some printed line, ``...`` stands
for any text, and numbers agree within a tolerance (see ``numbers_agree``).

Prose quotes output with the ``output`` role (a page declares ``.. role:: output(literal)``, which
renders it as code): ``:output:`recon 97.165 kl 5.667``` must appear, with the same tolerance, in
a line that some command of the pages printed. A number from a run that no command of the pages
repeats (a benchmark, a test) is not quoted in prose this way.
"""

from __future__ import annotations

import os
import re
import shlex
from dataclasses import dataclass, field

COMMAND_WORDS = ("python", "python3", "torchrun", "ipython", "tensorboard", "pip", ".venv/bin/", "mkdir")
MARKER = re.compile(r"^\.\. doc-test: (illustrative|last step|printed by)\b(.*)$")
# the first words of the lines the framework prints: a literal block starting with one is output
OUTPUT_WORDS = ("WARNING ", "ERROR", "Epoch ", "debug_", "Sanity check", "First difference")
NUMBER = r"-?\d+(?:\.\d+)?(?:e[-+]?\d+)?"


@dataclass
class FileBlock:
    """A block that is a file the following commands use (its first line is ``# name.py``)."""

    page: str
    line: int
    path: str
    content: str


@dataclass
class OutputBlock:
    """Output quoted without its command; ``test`` (a path) runs what prints it, or None: nothing checks it."""

    page: str
    line: int
    lines: list[str]
    test: str | None

    @property
    def where(self) -> str:
        return f"{self.page}:{self.line}"


@dataclass
class ProseQuote:
    """Output quoted in a page's prose with the ``output`` role: some command of the pages must print it."""

    page: str
    line: int
    text: str

    @property
    def where(self) -> str:
        return f"{self.page}:{self.line}"


@dataclass
class Command:
    """One command of a page, where it is written, and what the page says it prints."""

    page: str
    line: int
    text: str
    expected: list[str] = field(default_factory=list)
    illustrative: str | None = None  # why it is not run

    @property
    def where(self) -> str:
        return f"{self.page}:{self.line}"


def extract(page: str, text: str) -> list[Command | FileBlock | OutputBlock]:
    """The commands and file blocks of one page, in the order written."""
    lines = text.split("\n")
    commands: list[Command | FileBlock | OutputBlock] = []
    marker: tuple[str, str] | None = None
    i = 0
    while i < len(lines):
        stripped = lines[i].strip()
        found = MARKER.match(stripped)
        if found:
            marker = (found.group(1), found.group(2).strip(" ()"))
        opens_block = stripped.endswith("::") and not stripped.startswith("..") or stripped == ".. code-block:: bash"
        if not opens_block:
            i += 1
            continue
        start, block = _literal_block(lines, i + 1)
        commands += _commands_of_block(page, start, block, marker)
        marker = None
        i = start + len(block)
    return commands


def prose_quotes(page: str, text: str) -> list[ProseQuote]:
    """The ``:output:`...``` quotes of one page, in the order written."""
    return [
        ProseQuote(page, number, found.group(1))
        for number, line in enumerate(text.split("\n"), 1)
        for found in re.finditer(r":output:`([^`]+)`", line)
    ]


def _literal_block(lines: list[str], i: int) -> tuple[int, list[str]]:
    """The indented block starting at or after line ``i`` (0-based start, lines with the indent removed)."""
    while i < len(lines) and not lines[i].strip():
        i += 1
    if i >= len(lines) or not lines[i].startswith(" "):
        return i, []
    indent = len(lines[i]) - len(lines[i].lstrip())
    end = i
    while end < len(lines) and (not lines[end].strip() or lines[end][:indent].isspace()):
        end += 1
    while end > i and not lines[end - 1].strip():
        end -= 1
    return i, [line[indent:] for line in lines[i:end]]


def _commands_of_block(
    page: str, start: int, block: list[str], marker: tuple[str, str] | None
) -> list[Command | FileBlock | OutputBlock]:
    named = re.fullmatch(r"# ([\w./-]+\.py)", block[0].strip()) if block else None
    if named:
        return [FileBlock(page, start + 1, named.group(1), "\n".join(block) + "\n")]
    if block and block[0].startswith(OUTPUT_WORDS):
        test = marker[1] if marker and marker[0] == "printed by" else None
        return [OutputBlock(page, start + 1, [line.strip() for line in block if line.strip()], test)]
    commands: list[Command] = []
    if any(line.startswith("$ ") for line in block):
        for offset, line in enumerate(block):
            if line.startswith("$ "):
                commands.append(Command(page, start + offset + 1, line[2:].strip()))
            elif commands and line.strip():
                commands[-1].expected.append(line.strip())
    elif block and block[0].startswith(COMMAND_WORDS):
        for offset, line in enumerate(block):
            if shlex.split(line, comments=True):  # not a comment continuing the line above
                commands.append(Command(page, start + offset + 1, _without_comment(line)))
    kind, why = marker or (None, "")
    for command in commands:
        if kind == "illustrative":
            command.illustrative = why or "marked illustrative"
        elif kind == "last step":
            command.text = command.text.rsplit(" && ", 1)[-1]
    return commands


def _without_comment(line: str) -> str:
    """``line`` without a trailing ``# comment`` (a ``#`` inside quotes stays)."""
    words = shlex.split(line, comments=True)
    for hash_sign in re.finditer(r"\s#", line):
        if shlex.split(line[: hash_sign.start()], comments=True) == words:
            return line[: hash_sign.start()].rstrip()
    return line.strip()


def documented_output(page: str, first_words: str) -> OutputBlock:
    """The block of output on ``page`` (a path from the repository root) whose first line starts with ``first_words``."""
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    with open(os.path.join(root, page), encoding="utf-8") as f:
        blocks = [
            b for b in extract(page, f.read()) if isinstance(b, OutputBlock) and b.lines[0].startswith(first_words)
        ]
    if len(blocks) != 1:
        raise LookupError(f"{len(blocks)} blocks of output on {page} start with {first_words!r}; expected 1")
    return blocks[0]


def assert_documented(output: str, page: str, first_words: str) -> None:
    """Fail unless ``output`` prints every line of the block of ``page`` that starts with ``first_words``."""
    block = documented_output(page, first_words)
    missing = missing_lines(block.lines, output)
    assert not missing, f"{block.where} quotes lines this run does not print:\n" + "\n".join(missing)


def unchecked_output(blocks: list[OutputBlock], tests: dict[str, str]) -> list[OutputBlock]:
    """The blocks of output that no test compares: unmarked ones, and those whose test (path -> its source)
    does not name their page and the start of their first line (the arguments of its ``assert_documented``)."""
    unchecked = []
    for block in blocks:
        literals = set(re.findall(r'"([^"\\\n]+)"', tests.get(block.test, "")))
        starts = [text for text in literals if len(text) >= 16 and block.lines[0].startswith(text)]
        if block.page not in literals or not starts:
            unchecked.append(block)
    return unchecked


def numbers_agree(expected: str, actual: str) -> bool:
    """Integers equal; decimals within 5% or two units of the last quoted digit (run-to-run noise)."""
    if "." not in expected and "e" not in expected.lower():
        return int(expected) == float(actual)
    decimals = len(expected.split(".")[1].split("e")[0]) if "." in expected else 0
    a, b = float(expected), float(actual)
    return abs(a - b) <= max(0.05 * max(abs(a), abs(b)), 2 * 10.0**-decimals)


def line_pattern(expected: str) -> tuple[re.Pattern, list[str]]:
    """A regex for one quoted line (numbers captured, ``...`` any text) and the quoted numbers."""
    parts, numbers = [], []
    for piece in re.split(f"(\\s*\\.\\.\\.\\s*|{NUMBER}|\\s+)", expected):
        if not piece:
            continue
        if piece.strip() == "...":
            parts.append(".*?")
        elif piece.isspace():
            parts.append(r"\s+")
        elif re.fullmatch(NUMBER, piece):
            parts.append(f"({NUMBER})")
            numbers.append(piece)
        else:
            parts.append(re.escape(piece))
    head = "" if expected.startswith("...") else "^"
    tail = "" if expected.endswith("...") else r"\s*$"
    return re.compile(head + "".join(parts) + tail), numbers


def missing_lines(expected: list[str], output: str) -> list[str]:
    """The quoted lines that no printed line matches."""
    printed = [line.strip() for line in output.splitlines()]
    missing = []
    for quoted in expected:
        pattern, numbers = line_pattern(quoted)
        if not any(_matches(pattern, numbers, line) for line in printed):
            missing.append(quoted)
    return missing


def unprinted_quotes(quotes: list[ProseQuote], outputs: list[str]) -> list[ProseQuote]:
    """The prose quotes that no line of ``outputs`` holds (as a part of the line, numbers within tolerance)."""
    printed = [line.strip() for output in outputs for line in output.splitlines()]
    missing = []
    for quote in quotes:
        pattern, numbers = line_pattern(f"... {quote.text} ...")
        if not any(_matches(pattern, numbers, line) for line in printed):
            missing.append(quote)
    return missing


def _matches(pattern: re.Pattern, numbers: list[str], line: str) -> bool:
    found = pattern.search(line)
    return found is not None and all(map(numbers_agree, numbers, found.groups()))
