"""Orthographies (transcription text) to symbols, as RETURNN's ``LmDataset`` parses them.

Three parts, each RETURNN's meaning: the symbol inventory (``orth_symbols_file``: one symbol per line, its id the
line number; ``orth_symbols_map_file``: ``"<symbol> <id>"`` lines, a dict literal or a pickled dict), the
post-processing of the text before parsing (``orth_post_process``), and the parse into symbols: characters, or
words with ``word_based``, where anything in square brackets (``[NOISE]``) is one upper-cased symbol.
"""

from __future__ import annotations

import ast
import pickle
import re
from collections.abc import Callable
from typing import Any

from framework.base.errors import ConfigError
from framework.base.safe_create import refuse_special

#: ``parse_orth_opts`` keys RETURNN's ``parse_orthography`` takes.
PARSE_OPTIONS = (
    "prefix",
    "postfix",
    "remove_chars",
    "collapse_spaces",
    "final_strip",
    "word_based",
    "upper_case_special",
    "square_brackets_for_specials",
)


def parse_orthography(
    text: str,
    *,
    prefix: list[str] = (),
    postfix: list[str] = ("[END]",),
    remove_chars: str = "(){}",
    collapse_spaces: bool = True,
    final_strip: bool = True,
    word_based: bool = False,
    upper_case_special: bool = True,
    square_brackets_for_specials: bool = True,
) -> list[str]:
    """``text`` as symbols, between ``prefix`` and ``postfix``, after removing ``remove_chars`` and collapsing
    whitespace: characters (spaces too), or whitespace-separated words with ``word_based``; ``[...]`` is one
    symbol (upper-cased with ``upper_case_special``)."""
    for char in remove_chars:
        text = text.replace(char, "")
    if collapse_spaces:
        text = " ".join(text.split())
    if final_strip:
        text = text.strip()
    return list(prefix) + _symbols(text, word_based, upper_case_special, square_brackets_for_specials) + list(postfix)


def _symbols(text: str, word_based: bool, upper_case_special: bool, brackets: bool) -> list[str]:
    # A state machine over the characters, as RETURNN's: nesting depth of brackets; inside, characters join the
    # current special symbol; outside, each character is a symbol, or joins the current word.
    out: list[str] = []
    depth = 0
    for char in text:
        if depth:
            if char == "[":
                depth += 1
            elif char == "]":
                depth -= 1
            elif upper_case_special:
                char = char.upper()
            out[-1] += char
        elif brackets and char == "[":
            depth = 1
            if out and not out[-1]:  # a word just ended by a space: the special symbol takes its place
                out[-1] += char
            else:
                out.append(char)
        elif not word_based:
            out.append(char)
        elif char.isspace():
            out.append("")
        else:
            if not out:
                out.append("")
            out[-1] += char
    return out


def read_symbols(path: str, owner: str) -> dict[str, int]:
    """``orth_symbols_file``: one symbol per line, its id the line number."""
    refuse_special(path, f"the orth_symbols_file of {owner}")
    try:
        with open(path, encoding="utf8") as f:
            symbols = f.read().splitlines()
    except OSError as exc:
        raise ConfigError(f"{owner}: cannot read orth_symbols_file {path!r} ({exc}).") from None
    return {symbol: i for i, symbol in enumerate(symbols)}


def read_symbol_map(path: str, owner: str) -> dict[str, int]:
    """``orth_symbols_map_file``: a pickled dict (``.pkl``), a dict literal ``{"a": 0, ...}``, or ``"<symbol> <id>"``
    lines; the ids must start at 0."""
    refuse_special(path, f"the orth_symbols_map_file of {owner}")
    try:
        if path.endswith(".pkl"):
            with open(path, "rb") as f:
                mapping = pickle.load(f)
        else:
            with open(path, encoding="utf8") as f:
                text = f.read()
            # RETURNN's test: the first 1024 characters, without spaces and newlines, open a dict literal.
            if re.search("^{[\"'].+[\"']:[0-9]+,", text[:1024].replace(" ", "").replace("\n", "")):
                mapping = ast.literal_eval(text)
            else:
                mapping = {}
                for number, line in enumerate(text.splitlines(), 1):
                    parts = line.split(None, 1)
                    if len(parts) != 2:
                        raise ValueError(f"line {number} is {line!r}, not '<symbol> <id>'")
                    mapping[parts[0]] = int(parts[1])
    except (OSError, ValueError, SyntaxError, pickle.UnpicklingError, EOFError) as exc:
        raise ConfigError(
            f"{owner}: cannot read orth_symbols_map_file {path!r} ({exc}). Give '<symbol> <id>' lines, a dict literal "
            f"{{'a': 0, ...}} or a pickled dict (.pkl)."
        ) from None
    if not isinstance(mapping, dict) or not mapping:
        raise ConfigError(f"{owner}: orth_symbols_map_file {path!r} holds no {{symbol: id}} entries.")
    mapping = {str(symbol): int(i) for symbol, i in mapping.items()}
    if min(mapping.values()) != 0:
        raise ConfigError(f"{owner}: the ids of orth_symbols_map_file {path!r} must start at 0 (as RETURNN requires).")
    return mapping


def labels_of(mapping: dict[str, int]) -> list[str]:
    """The label of each id 0 .. max id (where several symbols share an id, the last in sorted order, as RETURNN)."""
    by_id = {i: symbol for symbol, i in sorted(mapping.items(), key=lambda item: (item[1], item[0]))}
    return [by_id.get(i, "") for i in range(max(by_id) + 1)]


def _collapse_whitespace(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip()


def _lowercase_keep_special(text: str) -> str:
    # Every word that is not [...] or <...> lower-cased.
    return re.sub(r"(\s|^)(?!(\[\S*])|(<\S*>))\S+(?=\s|$)", lambda m: m.group(0).lower(), text)


#: RETURNN's named post-processors that need no extra package.
POST_PROCESSORS: dict[str, Callable[[str], str]] = {
    "lowercase": str.lower,
    "lowercase_keep_special": _lowercase_keep_special,
    "collapse_whitespace": _collapse_whitespace,
    "basic_cleaners": lambda text: _collapse_whitespace(text.lower()),
}


def post_processor(spec: Any, owner: str) -> Callable[[str], str] | None:
    """``orth_post_process``: a function str -> str, a name of ``POST_PROCESSORS``, or a list of these (applied in
    order); None when there is nothing to do."""
    if not spec:
        return None
    steps = list(spec) if isinstance(spec, (list, tuple)) else [spec]
    functions = []
    for step in steps:
        if callable(step):
            functions.append(step)
        elif isinstance(step, str) and step in POST_PROCESSORS:
            functions.append(POST_PROCESSORS[step])
        else:
            raise ConfigError(
                f"{owner}: orth_post_process {step!r} is not supported here: give a function str -> str, or one of "
                f"{', '.join(POST_PROCESSORS)}. RETURNN's english_cleaners and transliteration_cleaners need the "
                f"unidecode and inflect packages: import them from returnn.datasets.lm in the config and pass the "
                f"function itself."
            )

    def process(text: str) -> str:
        for function in functions:
            text = function(text)
        return text

    return process
