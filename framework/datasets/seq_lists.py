"""Sequence lists as RETURNN reads them (``seq_list_file``, ``seq_list_filter_file``): tags by name.

A text file holds one tag per line; a ``.pkl`` file a pickled list (or, for ``MetaDataset``, a dict of lists);
either may be gzipped (``.gz``). Lines are kept as they are (RETURNN does not strip them).
"""

from __future__ import annotations

import ast
import gzip
import pickle
from typing import Any

from framework.base.errors import ConfigError
from framework.base.safe_create import refuse_special


def read_seq_list(path: Any, owner: str, option: str = "seq_list_file") -> list[str]:
    """The tags ``path`` lists, for ``owner``'s ``option``; a config error names the file and what is wrong."""
    if not isinstance(path, str):
        raise ConfigError(f"{owner}: {option} must be the path of a text or .pkl file of tags, got {path!r}.")
    refuse_special(path, f"the {option} of {owner}")
    opener = gzip.open if path.endswith(".gz") else open
    try:
        if path.removesuffix(".gz").endswith(".pkl"):
            with opener(path, "rb") as f:
                tags = pickle.load(f)
        else:
            with opener(path, "rt", encoding="utf8") as f:
                tags = f.read().splitlines()
    except (OSError, pickle.UnpicklingError, EOFError, UnicodeDecodeError) as exc:
        raise ConfigError(
            f"{owner}: cannot read {option} {path!r} ({exc}). Give a text file with one tag per line, "
            f"or a pickled list of tags (.pkl), optionally gzipped."
        ) from None
    if not isinstance(tags, list) or not all(isinstance(tag, str) for tag in tags):
        raise ConfigError(
            f"{owner}: {option} {path!r} holds a {type(tags).__name__}, not a list of tags (str). Write one tag per "
            f"line, or pickle a list of str."
        )
    return tags


def read_seq_lens(path: Any, owner: str) -> dict[str, float]:
    """RETURNN's ``seq_order_seq_lens_file``: a Python dict literal ``{tag: length}``, optionally gzipped."""
    if not isinstance(path, str):
        raise ConfigError(f"{owner}: seq_order_seq_lens_file must be a path, got {path!r}.")
    refuse_special(path, f"the seq_order_seq_lens_file of {owner}")
    try:
        with gzip.open(path, "rt", encoding="utf8") if path.endswith(".gz") else open(path, encoding="utf8") as f:
            lengths = ast.literal_eval(f.read())
    except (OSError, ValueError, SyntaxError, EOFError) as exc:
        raise ConfigError(
            f"{owner}: cannot read seq_order_seq_lens_file {path!r} as a dict literal {{tag: length}} ({exc})."
        ) from None
    if not isinstance(lengths, dict):
        raise ConfigError(f"{owner}: seq_order_seq_lens_file {path!r} holds a {type(lengths).__name__}, not a dict.")
    return lengths
