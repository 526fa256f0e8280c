"""RETURNN's vocabularies: text to label ids, as ``OggZipDataset``'s ``targets`` option describes them.

A ``targets`` dict is what RETURNN's ``Vocabulary.create_vocab`` takes: ``{"class": "BytePairEncoding",
"bpe_file": ..., "vocab_file": ...}`` (a ``bpe_file`` alone also means BPE), ``{"class": "SentencePieces",
"model_file": ...}``, ``{"class": "CharacterTargets", "vocab_file": ...}`` or a plain word ``Vocabulary``
(``{"vocab_file": ...}``). Vocab files are read as RETURNN reads them: a Python dict literal ``{label: id}``,
a pickled dict (``.pkl``) or one label per line; optionally gzipped. The ids are RETURNN's for the same files
(``tests/test_returnn_datasets.py`` compares them).
"""

from __future__ import annotations

import ast
import gzip
import os
import pickle
import re
from typing import Any

from framework.base.errors import ConfigError, DataError
from framework.base.safe_create import refuse_special

_NOT_GIVEN = object()


class Vocabulary:
    """Whitespace-separated words to ids through a vocab file.

    :param vocab_file: the labels: a dict literal ``{label: id}``, a pickled dict, or one label per line.
    :param unknown_label: the label (or id) that words missing from the vocab become; None: a missing word is
        an error. RETURNN's default is "UNK", which must then be in the vocab.
    :param seq_postfix: ids appended to every sequence (e.g. ``[0]`` for an end-of-sentence label).
    :param bos_label: kept for RETURNN compatibility (checked to be in the vocab; not added to sequences).
    :param eos_label: as ``bos_label``.
    :param pad_label: as ``bos_label``.
    :param num_labels: the expected number of labels (checked).
    """

    default_unknown_label: Any = "UNK"

    def __init__(
        self,
        vocab_file: str | None = None,
        *,
        unknown_label: Any = _NOT_GIVEN,
        seq_postfix: list[int] | None = None,
        bos_label: Any = None,
        eos_label: Any = None,
        pad_label: Any = None,
        num_labels: int | None = None,
        labels: list[str] | None = None,
    ):
        self.name = type(self).__name__
        if labels is not None:
            self.labels, self.ids = list(labels), {label: i for i, label in enumerate(labels)}
        else:
            self.labels, self.ids = self._read_vocab(vocab_file)
        if num_labels is not None and num_labels != len(self.labels):
            raise ConfigError(f"{self.name}: num_labels = {num_labels}, but {vocab_file} holds {len(self.labels)}.")
        if unknown_label is _NOT_GIVEN:
            unknown_label = self.default_unknown_label
        self.unknown_id = None if unknown_label is None else self._id_of(unknown_label, "unknown_label")
        for option, label in (("bos_label", bos_label), ("eos_label", eos_label), ("pad_label", pad_label)):
            if label is not None:
                self._id_of(label, option)
        self.seq_postfix = list(seq_postfix or [])

    @property
    def num_labels(self) -> int:
        """The number of labels (the sparse dim of the ids)."""
        return len(self.labels)

    def _id_of(self, label: Any, option: str) -> int:
        if isinstance(label, int) and 0 <= label < len(self.labels):
            return label
        if isinstance(label, str) and label in self.ids:
            return self.ids[label]
        raise ConfigError(
            f"{self.name}: {option} = {label!r} is not in the vocabulary ({len(self.labels)} labels, e.g. "
            f"{self.labels[:5]}). Give a label of the vocab file, or {option}=None"
            + (" (RETURNN's default unknown_label is 'UNK')." if option == "unknown_label" else ".")
        )

    def _read_vocab(self, path: str | None) -> tuple[list[str], dict[str, int]]:
        """(the label of each id, the id of each label) as RETURNN's ``Vocabulary._parse_vocab`` reads the file.

        A dict may give several labels one id (i6_core writes ``"<s>": 0, "</s>": 0``): each of them reads as that
        id, and the id's label is the one RETURNN takes, the last of them in sorted order. The ids must be
        0 .. N-1, each used."""
        if not path:
            raise ConfigError(f"{self.name}: vocab_file is missing; give the path of the vocabulary.")
        path = os.fspath(path)
        refuse_special(path, f"vocab_file of {self.name}")
        try:
            if path.endswith(".pkl"):
                with open(path, "rb") as f:
                    mapping = pickle.load(f)
            else:
                opener = gzip.open if path.endswith(".gz") else open
                with opener(path, "rt", encoding="utf8") as f:
                    text = f.read()
                if not text.startswith("{"):
                    lines = text.splitlines()
                    return lines, {line: i for i, line in enumerate(lines)}
                mapping = ast.literal_eval(text)
        except (OSError, ValueError, SyntaxError, pickle.UnpicklingError) as exc:
            raise ConfigError(f"{self.name}: cannot read the vocab file {path!r} ({exc}).") from None
        if not isinstance(mapping, dict) or not all(isinstance(i, int) for i in mapping.values()):
            raise ConfigError(f"{self.name}: {path} must hold a dict {{label: id}}, or one label per line.")
        label_of = {i: label for label, i in sorted(mapping.items())}
        if not label_of or sorted(label_of) != list(range(len(label_of))):
            unused = sorted(set(range(max(label_of, default=0) + 1)) - set(label_of))
            raise ConfigError(
                f"{self.name}: {path} must use the ids 0 .. N-1, each at least once (as RETURNN requires); "
                f"unused: {unused[:10]}."
            )
        return [label_of[i] for i in range(len(label_of))], dict(mapping)

    def get_seq(self, text: str) -> list[int]:
        """The ids of ``text`` (plus ``seq_postfix``)."""
        return self.ids_of(text.split()) + self.seq_postfix

    def ids_of(self, labels: list[str]) -> list[int]:
        """The ids of ``labels``; a label missing from the vocab is the unknown label, or an error without one."""
        if self.unknown_id is not None:
            return [self.ids.get(label, self.unknown_id) for label in labels]
        missing = [label for label in labels if label not in self.ids]
        if missing:
            raise DataError(
                f"{self.name}: {missing[0]!r} is not in the vocabulary and unknown_label is None. Add it to the vocab "
                f"file or set unknown_label to a label of the vocab."
            )
        return [self.ids[label] for label in labels]


class CharacterTargets(Vocabulary):
    """Every character a label (RETURNN's ``CharacterTargets``; its default unknown label is "@")."""

    default_unknown_label = "@"

    def get_seq(self, text: str) -> list[int]:
        return self.ids_of(list(text)) + self.seq_postfix


class BytePairEncoding(Vocabulary):
    """Words split into subwords by BPE merge operations (subword-nmt's ``apply_bpe``, as RETURNN applies it).

    Every subword but a word's last carries the "@@" continuation mark; subwords missing from the vocab are split
    back along their merges until they are in it.

    :param bpe_file: the merge operations, one pair per line (subword-nmt's codes file, "#version: 0.2" header).
    """

    def __init__(self, vocab_file: str, bpe_file: str, **kwargs: Any):
        super().__init__(vocab_file, **kwargs)
        self.codes = _BpeCodes(os.fspath(bpe_file), self.ids)

    def get_seq(self, text: str) -> list[int]:
        return self.ids_of(self.codes.segment(text)) + self.seq_postfix


class SentencePieces(Vocabulary):
    """A SentencePiece model (``pip install sentencepiece``): RETURNN passes its options to
    ``SentencePieceProcessor`` (``model_file``, ``add_bos``, ``add_eos``, ``enable_sampling``, ``alpha``, ...)."""

    def __init__(self, **opts: Any):
        try:
            import sentencepiece
        except ImportError:
            raise ConfigError(
                "SentencePieces targets need the sentencepiece package: pip install sentencepiece."
            ) from None
        opts = {key: os.fspath(value) if key == "model_file" else value for key, value in opts.items()}
        try:
            self.processor = sentencepiece.SentencePieceProcessor(**opts)
        except (OSError, RuntimeError, TypeError) as exc:
            raise ConfigError(f"SentencePieces: cannot load the model with {opts} ({exc}).") from None
        self.name = "SentencePieces"
        self.opts = opts
        self.labels = [self.processor.id_to_piece(i) for i in range(self.processor.vocab_size())]
        self.ids = {label: i for i, label in enumerate(self.labels)}
        self.unknown_id, self.seq_postfix = self.processor.unk_id(), []

    def get_seq(self, text: str) -> list[int]:
        return self.processor.encode(text, out_type=int)

    def __getstate__(self) -> dict[str, Any]:  # the processor is rebuilt from the model file in a worker
        return {**self.__dict__, "processor": None}

    def __setstate__(self, state: dict[str, Any]) -> None:
        import sentencepiece

        self.__dict__.update(state)
        self.processor = sentencepiece.SentencePieceProcessor(**self.opts)


VOCABULARY_CLASSES = {cls.__name__: cls for cls in (Vocabulary, CharacterTargets, BytePairEncoding, SentencePieces)}


def create_vocabulary(opts: dict[str, Any], owner: str) -> Vocabulary:
    """The vocabulary a RETURNN ``targets`` dict describes (RETURNN's ``Vocabulary.create_vocab``)."""
    opts = dict(opts)
    name = opts.pop("class", "BytePairEncoding" if "bpe_file" in opts else "Vocabulary")
    if name not in VOCABULARY_CLASSES:
        raise ConfigError(
            f"{owner}: targets class {name!r} is not supported here; supported: {', '.join(VOCABULARY_CLASSES)}. "
            f"Turn the text into ids before training (e.g. an HDF file with RETURNN's tools) and read that instead."
        )
    try:
        return VOCABULARY_CLASSES[name](**opts)
    except TypeError as exc:
        raise ConfigError(f"{owner}: targets {name} cannot be built with {opts} ({exc}).") from None


class _BpeCodes:
    """The merge operations of a subword-nmt codes file, applied to words."""

    separator = "@@"

    def __init__(self, path: str, vocab: dict[str, int]):
        refuse_special(path, "bpe_file")
        try:
            with open(path, encoding="utf8") as f:
                lines = f.read().splitlines()
        except OSError as exc:
            raise ConfigError(f"BytePairEncoding: cannot read bpe_file {path!r} ({exc}).") from None
        self.version = (0, 1)
        if lines and lines[0].startswith("#version:"):
            self.version = tuple(int(x) for x in re.sub(r"(\.0+)*$", "", lines[0].split()[-1]).split("."))
        if self.version not in ((0, 1), (0, 2)):
            raise ConfigError(f"BytePairEncoding: {path} has BPE codes version {self.version}; 0.1 and 0.2 are known.")
        self.rank: dict[tuple[str, ...], int] = {}
        last: dict[tuple[str, ...], int] = {}
        for i, line in enumerate(lines):  # the first occurrence of a pair counts (the version line is a "pair" too)
            self.rank.setdefault(tuple(line.split()), i)
            last[tuple(line.split())] = i
        # Which pair a merged string splits back into: where two pairs make the same string, subword-nmt's reverse
        # table keeps the one listed first (it is built from the codes in reverse order).
        self.merged = {pair[0] + pair[1]: pair for pair in sorted(last, key=last.get, reverse=True) if len(pair) == 2}
        self.vocab = vocab
        self._cache: dict[str, list[str]] = {}

    def segment(self, text: str) -> list[str]:
        """The subwords of whitespace-separated ``text``, "@@" on all but the last of each word."""
        out, category, in_braces = [], False, False
        for word in text.split():
            # subword-nmt leaves "$category {words}" as it is
            if word[0] == "$" and len(word) > 1:
                category = True
                out.append(word)
                continue
            if (category and word[0] == "{") or (in_braces and word[0] != "}"):
                in_braces = True
                out.append(word)
                continue
            category = in_braces = False
            pieces = self.encode_word(word)
            out.extend(piece + self.separator for piece in pieces[:-1])
            out.append(pieces[-1])
        return out

    def encode_word(self, word: str) -> list[str]:
        """The subwords of one word: merges applied by rank, then pieces missing from the vocab split back."""
        if word not in self._cache:
            if self.version == (0, 1):
                symbols = [*word, "</w>"]
            else:
                symbols = [*word[:-1], word[-1] + "</w>"]
            while len(symbols) > 1:
                pairs = {(a, b) for a, b in zip(symbols, symbols[1:], strict=False)}
                best = min(pairs, key=lambda pair: self.rank.get(pair, float("inf")))
                if best not in self.rank:
                    break
                symbols = _merge(symbols, best)
            if len(symbols) == 1 and self.version == (0, 2) and len(word) == 1:
                pieces = [word]
            else:
                if symbols[-1] == "</w>":
                    symbols = symbols[:-1]
                elif symbols[-1].endswith("</w>"):
                    symbols = [*symbols[:-1], symbols[-1].removesuffix("</w>")]
                pieces = self._in_vocab(symbols) if self.vocab else symbols
            self._cache[word] = pieces
        return self._cache[word]

    def _in_vocab(self, symbols: list[str]) -> list[str]:
        out = []
        for piece in symbols[:-1]:
            out.extend([piece] if piece + self.separator in self.vocab else self._split(piece, final=False))
        last = symbols[-1]
        out.extend([last] if last in self.vocab else self._split(last, final=True))
        return out

    def _split(self, piece: str, final: bool) -> list[str]:
        """Undo the merge that made ``piece`` until the parts are in the vocab (or cannot be split)."""
        pair = self.merged.get(piece + "</w>" if final else piece)
        if pair is None:
            return [piece]
        left, right = pair
        if final:
            right = right[:-4]
        out = [left] if left + self.separator in self.vocab else self._split(left, final=False)
        right_known = (right in self.vocab) if final else (right + self.separator in self.vocab)
        return out + ([right] if right_known else self._split(right, final))


def _merge(symbols: list[str], pair: tuple[str, str]) -> list[str]:
    first, second = pair
    out, i = [], 0
    while i < len(symbols):
        if i < len(symbols) - 1 and symbols[i] == first and symbols[i + 1] == second:
            out.append(first + second)
            i += 2
        else:
            out.append(symbols[i])
            i += 1
    return out
