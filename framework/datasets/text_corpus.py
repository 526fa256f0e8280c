"""A text corpus as RETURNN's ``LmDataset`` reads it: one orthography per line, or per segment of a Bliss XML.

The files are read as RETURNN reads them, so that the sequences and their tags (``line-<n>``) are the same:

- plain text: lines split at ``\\n``; an empty line is skipped (``skip_empty_lines``); a last line without a
  ``\\n`` is left out (RETURNN's reader stops at the last newline); the length a "sorted" ordering sorts by is
  the line's byte count as in the file (trailing spaces included);
- gzipped text (``.gz``): lines stripped, empty ones skipped; sorted by the stripped byte count;
- Bliss XML (a ``<corpus>`` root, optionally gzipped): each ``<segment>``'s ``<orth>``, whitespace collapsed.

The orthographies are held as one bytes blob with offsets (a few bytes per line beyond the text).
"""

from __future__ import annotations

import gzip
from collections.abc import Iterator
from dataclasses import dataclass
from xml.etree import ElementTree

import numpy as np

from framework.base.errors import ConfigError
from framework.base.safe_create import refuse_special


@dataclass
class TextCorpus:
    """The orthographies of some files: ``blob[starts[i]:starts[i] + lengths[i]]`` is line ``i``'s (UTF-8)."""

    blob: bytes
    starts: np.ndarray
    lengths: np.ndarray
    #: what a "sorted" ordering sorts by (RETURNN's line lengths, see the module doc)
    sort_lengths: np.ndarray
    #: the number of orthographies each file gave, in order
    per_file: list[int]
    #: with a line limit that stopped reading a file: RETURNN's estimate of all files' lines (else None)
    estimated_total: int | None = None

    def __len__(self) -> int:
        return len(self.starts)

    def orth(self, index: int) -> str:
        """Orthography ``index``, decoded and stripped."""
        start = int(self.starts[index])
        return self.blob[start : start + int(self.lengths[index])].decode("utf8").strip()


def read_corpus(
    paths: list[str], *, skip_empty_lines: bool, owner: str, limit_per_file: int | None = None
) -> TextCorpus:
    """The orthographies of ``paths``, in order; with ``limit_per_file`` (RETURNN's
    ``lm_dataset_debug_limit_line_count``) the first that many of each file, as RETURNN reads
    them: at least one, gzipped text only (RETURNN stops on other files), and RETURNN's estimate of all lines."""
    chunks: list[bytes] = []
    starts: list[int] = []
    lengths: list[int] = []
    sort_lengths: list[int] = []
    per_file: list[int] = []
    estimated = 0  # RETURNN's estimate of the lines of all files, when the limit stops one (else None)
    limited = False
    offset = 0
    for path in paths:
        refuse_special(path, f"a corpus file of {owner}")
        before = len(starts)
        raw: list = []  # the gzipped file's raw file object, whose position RETURNN's estimate reads
        try:
            if is_bliss(path):
                lines = ((orth, len(orth)) for orth in _bliss_orths(path))
            elif path.endswith(".gz"):
                lines = _gzip_lines(path, skip_empty_lines, raw)
            else:
                lines = _text_lines(path, skip_empty_lines)
            for line, sort_length in lines:
                chunks.append(line)
                starts.append(offset)
                lengths.append(len(line))
                sort_lengths.append(sort_length)
                offset += len(line)
                # RETURNN checks after each line it keeps: a limit below 1 keeps one line
                if limit_per_file is not None and len(starts) - before >= limit_per_file:
                    if not raw:  # plain text or Bliss XML
                        raise ConfigError(_limit_unsupported(owner, path, limit_per_file))
                    position = raw[0].tell()
                    raw[0].seek(0, 2)
                    estimated += int((len(starts) - before) * (raw[0].tell() / position))
                    limited = True
                    lines.close()
                    break
            else:
                estimated += len(starts) - before
        except (OSError, EOFError, ElementTree.ParseError) as exc:
            raise ConfigError(f"{owner}: cannot read corpus file {path!r} ({exc}).") from None
        per_file.append(len(starts) - before)
    return TextCorpus(
        b"".join(chunks),
        np.array(starts, dtype=np.int64),
        np.array(lengths, dtype=np.int64),
        np.array(sort_lengths, dtype=np.int64),
        per_file,
        estimated if limited else None,
    )


def _limit_unsupported(owner: str, path: str, limit: int) -> str:
    return (
        f"{owner}: lm_dataset_debug_limit_line_count = {limit} stops at {path!r}, which is not gzipped text: RETURNN "
        f"stops there too (an AssertionError in LmDataset: its line limit is implemented for gzipped text only). "
        f"Gzip the corpus file (gzip {path}), raise the limit above its number of lines, or delete the option."
    )


def _text_lines(path: str, skip_empty_lines: bool) -> Iterator[tuple[bytes, int]]:
    with open(path, "rb") as f:
        data = f.read()
    pos = 0
    while True:
        end = data.find(b"\n", pos)
        if end == -1:  # a last line without a newline is not read, as RETURNN does not read it
            return
        if end > pos or not skip_empty_lines:
            yield data[pos:end], end - pos
        pos = end + 1


def _gzip_lines(path: str, skip_empty_lines: bool, raw_file: list | None = None) -> Iterator[tuple[bytes, int]]:
    """The stripped lines of a gzipped file, read as RETURNN reads them (``GzipFile`` over the open file, whose
    position at a line limit gives RETURNN's estimate of the file's lines; ``raw_file`` receives it)."""
    with open(path, "rb") as file, gzip.GzipFile(fileobj=file) as f:
        if raw_file is not None:
            raw_file.append(file)
        for raw in f:
            line = raw.strip()
            if line or not skip_empty_lines:
                yield line, len(line)


def is_bliss(path: str) -> bool:
    """Whether ``path`` (optionally gzipped) is XML with a ``<corpus>`` root."""
    try:
        with gzip.open(path, "rb") if path.endswith(".gz") else open(path, "rb") as f:
            _, root = next(iter(ElementTree.iterparse(f, events=("start",))))
            return root.tag == "corpus"
    except (OSError, EOFError, ElementTree.ParseError, StopIteration):
        return False


def _bliss_orths(path: str) -> Iterator[bytes]:
    with gzip.open(path, "rb") if path.endswith(".gz") else open(path, "rb") as f:
        for _, element in ElementTree.iterparse(f, events=("end",)):
            if element.tag == "segment":
                orth = element.find("orth")
                text = (orth.text if orth is not None else None) or ""
                yield " ".join(text.split()).encode("utf8")
                element.clear()
