"""RETURNN's ``LmDataset``: a text corpus as sequences of symbol ids, for language models.

``{"class": "LmDataset", "corpus_file": "train.txt.gz", "orth_symbols_map_file": "vocab.txt", "word_based": True}``
gives one sequence per line (tags ``line-0``, ``line-1``, ... of the corpus lines, as RETURNN numbers them), key
``data`` with the ids of the line's words (or characters) followed by ``seq_end_symbol``, and with
``add_delayed_seq_data`` key ``delayed``: ``delayed_seq_data_start_symbol`` then ``data`` without its last id (the
language model's input, ``data`` its target). The ids, tags, dtypes and orders ("default", "sorted" by the line's
bytes as RETURNN sorts) are RETURNN's for the same files (``tests/test_returnn_datasets_more.py`` compares them).

A line is turned into ids when it is read, so a large corpus costs its text in memory, not its ids.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import numpy as np

from framework.base import log
from framework.base.config import get_global_config
from framework.base.errors import ConfigError, DataError
from framework.base.options import register
from framework.base.safe_create import refuse_special
from framework.base.util import printable
from framework.datasets.base import Dataset, note_no_cache_manager
from framework.datasets.orthography import (
    PARSE_OPTIONS,
    labels_of,
    parse_orthography,
    post_processor,
    read_symbol_map,
    read_symbols,
)
from framework.datasets.seq_lists import read_seq_list
from framework.datasets.text_corpus import read_corpus
from framework.datasets.vocabulary import Vocabulary, create_vocabulary

register(
    "lm_dataset_debug_limit_line_count",
    "int | None",
    None,
    "RETURNN's option: every LmDataset reads only the first this many lines of each corpus file (at least one; "
    "gzipped text only, as RETURNN, which stops on other files) and shrinks its partition_epoch by RETURNN's "
    "estimate of the share read. None: every line.",
    __name__,
)


def _debug_limit_line_count() -> int | None:
    """``lm_dataset_debug_limit_line_count`` of the run's config (RETURNN reads it from its global config too); None
    outside a run (a dataset built by a test or a tool)."""
    try:
        return get_global_config().int("lm_dataset_debug_limit_line_count")
    except ConfigError:  # no config loaded
        return None


class LmDataset(Dataset):
    """Lines of text as symbol ids (RETURNN's parameters and meaning; those not listed are refused by name).

    :param corpus_file: a text file (one orthography per line), gzipped text (``.gz``) or a Bliss XML corpus; a
        list of these (concatenated), or a function returning one or a list.
    :param orth_vocab: a RETURNN vocabulary dict (``{"vocab_file": ..., "unknown_label": ...}``, BPE,
        SentencePiece, characters), instead of the symbol files; it parses the text itself.
    :param orth_symbols_file: the symbols, one per line (id = line number); or a function returning the path.
    :param orth_symbols_map_file: ``"<symbol> <id>"`` lines, a dict literal or a pickled dict (``.pkl``).
    :param orth_replace_map_file: a JSON dict ``{symbol: replacement text}`` applied to the parsed symbols.
    :param orth_post_process: a function str -> str (or a list, or RETURNN's names "lowercase",
        "collapse_whitespace", "basic_cleaners", "lowercase_keep_special") applied to each line first.
    :param word_based: symbols are whitespace-separated words; else characters (spaces included).
    :param word_end_symbol: with characters: the symbol each space becomes, also added before ``seq_end_symbol``.
    :param seq_end_symbol: appended to every sequence; None: nothing.
    :param unknown_symbol: what ``auto_replace_unknown_symbol`` puts in place of a symbol not in the inventory.
    :param parse_orth_opts: options of RETURNN's ``parse_orthography`` (``prefix``, ``postfix``, ``remove_chars``,
        ``collapse_spaces``, ``final_strip``, ``upper_case_special``, ...).
    :param auto_replace_unknown_symbol: a symbol not in the inventory becomes ``unknown_symbol``; else the line
        is invalid.
    :param error_on_invalid_seq: an invalid line (a symbol not in the inventory) stops the run, naming it;
        False: it is left out of every epoch, as RETURNN skips it.
    :param add_delayed_seq_data: add key ``delayed`` (see the module doc).
    :param dtype: the ids' dtype; None: RETURNN's choice by the number of symbols (int8 up to 128, uint8 up to
        256, else int32).
    :param tag_prefix: the tags' prefix (RETURNN's default "line-"); ``seq_list_file`` gives tags instead: one
        file for all lines, or a list of one file per corpus file.
    :param skip_empty_lines: leave empty lines out (of plain and gzipped text).
    :param use_cache_manager: RETURNN's cluster file cache; the files are read in place here (said once).
    """

    returnn_window = "ignores"  # what RETURNN's class does with window (context_window.py)
    returnn_worker_shards = True  # RETURNN's class shards over DataLoader workers (supports_sharding)
    returnn_sortable = True  # RETURNN's class supports_seq_order_sorting: its forward run sorts it

    def __init__(
        self,
        corpus_file: Any,
        *,
        use_cache_manager: bool = False,
        skip_empty_lines: bool = True,
        seq_list_file: str | list[str] | None = None,
        orth_vocab: dict[str, Any] | Vocabulary | None = None,
        orth_symbols_file: str | Callable[[], str] | None = None,
        orth_symbols_map_file: str | Callable[[], str] | None = None,
        orth_replace_map_file: str | Callable[[], str] | None = None,
        orth_post_process: Any = None,
        word_based: bool = False,
        word_end_symbol: str | None = None,
        seq_end_symbol: str | None = "[END]",
        unknown_symbol: str | None = "[UNKNOWN]",
        parse_orth_opts: dict[str, Any] | None = None,
        phone_info: dict[str, Any] | None = None,
        add_random_phone_seqs: int = 0,
        auto_replace_unknown_symbol: bool = False,
        log_auto_replace_unknown_symbols: bool | int = 10,
        log_skipped_seqs: bool | int = 10,
        error_on_invalid_seq: bool = True,
        add_delayed_seq_data: bool = False,
        delayed_seq_data_start_symbol: str = "[START]",
        dtype: str | None = None,
        tag_prefix: str | None = None,
        **kwargs: Any,
    ):
        super().__init__(**kwargs)
        if phone_info is not None or add_random_phone_seqs:
            raise ConfigError(
                "LmDataset: phone_info and add_random_phone_seqs (RETURNN's lexicon-based phoneme sequences, "
                "generated with its Lexicon and allophone state tying) are not supported here. Write the phoneme "
                "sequences once with RETURNN (tools/dump-dataset.py --type hdf) and read them with HDFDataset."
            )
        paths = corpus_file() if callable(corpus_file) else corpus_file
        paths = [paths] if isinstance(paths, str) else paths
        if not isinstance(paths, (list, tuple)) or not paths or not all(isinstance(p, str) for p in paths):
            raise ConfigError(
                f"LmDataset: corpus_file must be a path, a list of paths or a function returning these, got "
                f"{corpus_file!r}."
            )
        if use_cache_manager:
            note_no_cache_manager("LmDataset", list(paths))
        self.word_based = word_based
        self.unknown_symbol = unknown_symbol
        self.auto_replace_unknown_symbol = auto_replace_unknown_symbol
        self.error_on_invalid_seq = error_on_invalid_seq
        self.add_delayed_seq_data = add_delayed_seq_data
        self.vocab: Vocabulary | None = None
        self.symbol_map: dict[str, int] | None = None
        if orth_vocab:
            self._init_vocab(orth_vocab, orth_symbols_file, orth_symbols_map_file, auto_replace_unknown_symbol)
            labels = self.vocab.labels
        else:
            self.symbol_map = _symbol_inventory(orth_symbols_file, orth_symbols_map_file)
            labels = labels_of(self.symbol_map)
        self.labels = labels
        self.parse_opts = self._parse_options(parse_orth_opts, word_end_symbol, seq_end_symbol)
        self.replace_map = self._replace_map(orth_replace_map_file, word_end_symbol)
        # the symbol two adjacent ones of which collapse into one (a space, or the word end replacing it)
        self.space_symbol = word_end_symbol if word_end_symbol and not word_based else " "
        self.post_process = post_processor(orth_post_process, "LmDataset")
        self.dtype = dtype or _dtype_for(len(labels))
        self._check_symbols(delayed_seq_data_start_symbol)
        self.delayed_start = self.symbol_map[delayed_seq_data_start_symbol] if add_delayed_seq_data else None
        self._log_replaced = log_auto_replace_unknown_symbols
        self._log_skipped = log_skipped_seqs

        limit = _debug_limit_line_count()
        self.corpus = read_corpus(
            list(paths), skip_empty_lines=skip_empty_lines, owner="LmDataset", limit_per_file=limit
        )
        if len(self.corpus) == 0:
            raise ConfigError(f"LmDataset: the corpus files {list(paths)} hold no lines.")
        if self.corpus.estimated_total is not None:
            # RETURNN keeps the sub-epochs' size: partition_epoch shrinks by the estimated share of lines read
            # (returnn/datasets/lm.py LmDataset._read_corpus)
            share = len(self.corpus) / self.corpus.estimated_total
            partition_epoch = max(int(self.partition_epoch * share), 1)
            log.v4(
                f"LmDataset: lm_dataset_debug_limit_line_count = {limit}: read {len(self.corpus)} lines of an "
                f"estimated {self.corpus.estimated_total}; partition_epoch {self.partition_epoch} -> {partition_epoch}"
            )
            self.partition_epoch = partition_epoch
        self.tag_prefix = tag_prefix or "line-"
        self.tags = None if seq_list_file is None else self._read_tags(seq_list_file)
        self._valid: np.ndarray | None = None  # with error_on_invalid_seq=False: which lines parse
        self._lengths: np.ndarray | None = None
        self.name = f"LmDataset({len(self.corpus)} lines)"

    # -- construction helpers -------------------------------------------------------------------------------
    def _init_vocab(self, orth_vocab: Any, symbols_file: Any, map_file: Any, auto_replace: bool) -> None:
        if symbols_file or map_file or auto_replace:
            raise ConfigError(
                "LmDataset: orth_vocab parses the text itself; leave orth_symbols_file, orth_symbols_map_file and "
                "auto_replace_unknown_symbol out (the vocab's unknown_label replaces unknown words), as RETURNN requires."
            )
        if self.add_delayed_seq_data:
            raise ConfigError(
                "LmDataset: add_delayed_seq_data needs the start symbol's id from orth_symbols_file or "
                "orth_symbols_map_file (RETURNN fails with orth_vocab too). Give the symbol files instead of orth_vocab, "
                "or shift 'data' in the model: the delayed sequence is [start] + data[:-1]."
            )
        if isinstance(orth_vocab, Vocabulary):
            self.vocab = orth_vocab
        elif isinstance(orth_vocab, dict):
            self.vocab = create_vocabulary(orth_vocab, "LmDataset orth_vocab")
        else:
            raise ConfigError(f"LmDataset: orth_vocab must be a vocabulary dict, got {type(orth_vocab).__name__}.")

    def _parse_options(self, opts: Any, word_end_symbol: str | None, seq_end_symbol: str | None) -> dict[str, Any]:
        if self.vocab is not None:
            if opts:
                raise ConfigError("LmDataset: parse_orth_opts applies to the symbol files, not to orth_vocab.")
            return {}
        opts = dict(opts or {})
        unknown = sorted(set(opts) - set(PARSE_OPTIONS))
        if unknown:
            raise ConfigError(
                f"LmDataset: parse_orth_opts has {', '.join(map(repr, unknown))}, which RETURNN's parse_orthography "
                f"does not take; it takes {', '.join(PARSE_OPTIONS)}."
            )
        opts.setdefault("word_based", self.word_based)
        ends = [seq_end_symbol] if seq_end_symbol is not None else []
        if word_end_symbol and not self.word_based:
            ends = [word_end_symbol, *ends]  # a character sequence ends with a word end, then the sequence end
        opts.setdefault("postfix", ends)
        return opts

    def _replace_map(self, path: Any, word_end_symbol: str | None) -> dict[str, list[str]]:
        replace: dict[str, list[str]] = {}
        if self.vocab is not None:
            if path:
                raise ConfigError("LmDataset: orth_replace_map_file applies to the symbol files, not to orth_vocab.")
            return replace
        path = path() if callable(path) else path
        if path:
            refuse_special(path, "the orth_replace_map_file of LmDataset")
            try:
                with open(path, encoding="utf8") as f:
                    mapping = json.load(f)
            except (OSError, ValueError) as exc:
                raise ConfigError(f"LmDataset: cannot read orth_replace_map_file {path!r} as JSON ({exc}).") from None
            if not isinstance(mapping, dict):
                raise ConfigError(f"LmDataset: orth_replace_map_file {path!r} must hold a JSON object.")
            replace = {
                key: parse_orthography(
                    value,
                    prefix=(),
                    postfix=(),
                    word_based=self.word_based,
                    remove_chars="",
                    collapse_spaces=False,
                    final_strip=False,
                )
                for key, value in mapping.items()
            }
        if word_end_symbol and not self.word_based:
            replace[" "] = [word_end_symbol]
        return replace

    def _check_symbols(self, start_symbol: str) -> None:
        if self.symbol_map is None:
            return
        needed = {}
        if self.add_delayed_seq_data:
            needed["delayed_seq_data_start_symbol"] = start_symbol
        if self.auto_replace_unknown_symbol and self.unknown_symbol is not None:
            needed["unknown_symbol"] = self.unknown_symbol  # else RETURNN replaces it by itself forever
        for option, symbol in needed.items():
            if symbol not in self.symbol_map:
                raise ConfigError(
                    f"LmDataset: {option} = {symbol!r} is not one of the {len(self.symbol_map)} symbols (e.g. "
                    f"{list(self.symbol_map)[:5]}). Add it to the symbol file, or set {option} to one of its symbols."
                )

    def _read_tags(self, seq_list_file: str | list[str]) -> list[str]:
        if isinstance(seq_list_file, str):
            tags = read_seq_list(seq_list_file, "LmDataset")
        elif isinstance(seq_list_file, (list, tuple)) and len(seq_list_file) == len(self.corpus.per_file):
            tags = []
            for path, count in zip(seq_list_file, self.corpus.per_file, strict=True):
                part = read_seq_list(path, "LmDataset")
                if len(part) != count:
                    raise ConfigError(f"LmDataset: seq_list_file {path!r} lists {len(part)} tags for {count} lines.")
                tags.extend(part)
        else:
            raise ConfigError(
                f"LmDataset: seq_list_file must be one file of tags, or a list of one file per corpus file "
                f"({len(self.corpus.per_file)}), got {seq_list_file!r}."
            )
        if len(tags) != len(self.corpus):
            raise ConfigError(
                f"LmDataset: seq_list_file lists {len(tags)} tags, but the corpus has {len(self.corpus)} lines "
                f"(one tag per line, in order)."
            )
        return tags

    # -- the dataset interface -------------------------------------------------------------------------------
    @property
    def num_seqs(self) -> int:
        return len(self.corpus)

    def key_info(self) -> dict[str, dict[str, Any]]:
        info = {"shape": (None,), "dtype": self.dtype, "sparse_dim": len(self.labels)}
        return {"data": dict(info), **({"delayed": dict(info)} if self.add_delayed_seq_data else {})}

    def seq_tag(self, index: int) -> str:
        return self.tags[index] if self.tags is not None else f"{self.tag_prefix}{index}"

    def order_lengths(self) -> np.ndarray:
        return self.corpus.sort_lengths

    def get_seq_order(self, epoch: int, shard: tuple[int, int] = (0, 1)) -> np.ndarray:
        order = super().get_seq_order(epoch, shard)
        if self.error_on_invalid_seq:
            return order
        self._scan()
        kept = order[self._valid[order]]  # RETURNN skips an invalid line where it comes in the epoch's order
        if len(kept) < len(order):
            log.v4(f"LmDataset: epoch {epoch} leaves out {len(order) - len(kept)} line(s) with unknown symbols.")
        return kept

    def seq_lengths(self) -> np.ndarray:
        if self._lengths is None:
            if self.error_on_invalid_seq:
                self._lengths = np.array([len(self._ids(i)) for i in range(self.num_seqs)], dtype=np.int64)
            else:
                self._scan()
        return self._lengths

    def lengths_of(self, key: str) -> np.ndarray:
        return self.seq_lengths()

    def get_seq(self, index: int) -> dict[str, np.ndarray]:
        data = self._ids(index)
        if data is None:
            raise DataError(f"LmDataset: line {self.seq_tag(index)!r} has unknown symbols and is not in any epoch.")
        seq = {"data": data}
        if self.delayed_start is not None:
            seq["delayed"] = np.concatenate([np.array([self.delayed_start]), data[:-1]]).astype(self.dtype)
        return seq

    # -- text to ids -------------------------------------------------------------------------------------------
    def _scan(self) -> None:
        """Which lines parse, and their lengths (0 for those that do not): read once."""
        if self._valid is None:
            ids = [self._ids(i) for i in range(self.num_seqs)]
            self._valid = np.array([seq is not None for seq in ids], dtype=bool)
            self._lengths = np.array([0 if seq is None else len(seq) for seq in ids], dtype=np.int64)

    def _ids(self, index: int) -> np.ndarray | None:
        """Line ``index``'s ids; None for a line with a symbol outside the inventory where such lines are skipped."""
        orth = self.corpus.orth(index)
        if self.post_process is not None:
            orth = self.post_process(orth)
        if self.vocab is not None:
            return np.array(self.vocab.get_seq(orth), dtype=self.dtype)
        symbols = self._symbols(orth)
        missing = [s for s in symbols if s not in self.symbol_map]
        if not missing:
            return np.array([self.symbol_map[s] for s in symbols], dtype=self.dtype)
        if self.error_on_invalid_seq:
            raise DataError(
                f"LmDataset: line {self.seq_tag(index)!r} ({printable(orth, 120)!r}) has the symbol {missing[0]!r}, "
                f"which is not in the symbol inventory ({len(self.symbol_map)} symbols). Add it there, set "
                f"auto_replace_unknown_symbol=True (it becomes unknown_symbol {self.unknown_symbol!r}), or "
                f"error_on_invalid_seq=False to leave such lines out, as RETURNN does."
            )
        if self._log_skipped:
            log.v4(f"LmDataset: leaving out line {self.seq_tag(index)!r}: symbol {missing[0]!r} is not known.")
            self._log_skipped = self._log_skipped - 1 if not isinstance(self._log_skipped, bool) else True
        return None

    def _symbols(self, orth: str) -> list[str]:
        """The line's symbols after replacements, collapsing and (with ``auto_replace_unknown_symbol``) unknowns."""
        symbols = parse_orthography(orth, **self.parse_opts)
        while True:
            # As RETURNN: the replace map is applied again on every pass, and it grows by each unknown symbol found.
            symbols = [r for s in symbols for r in self.replace_map.get(s, [s])]
            symbols = _collapse_pairs(symbols, self.space_symbol)
            if not self.auto_replace_unknown_symbol:
                return symbols
            unknown = next((s for s in symbols if s not in self.symbol_map), None)
            if unknown is None:
                return symbols
            if self._log_replaced:
                log.v4(f"LmDataset: unknown symbol {unknown!r}, replaced by {self.unknown_symbol!r} from now on.")
                self._log_replaced = self._log_replaced - 1 if not isinstance(self._log_replaced, bool) else True
            self.replace_map[unknown] = [self.unknown_symbol] if self.unknown_symbol is not None else []


def _collapse_pairs(symbols: list[str], space: str) -> list[str]:
    """Two adjacent ``space`` symbols become one."""
    out: list[str] = []
    for symbol in symbols:
        if symbol == space and out and out[-1] == space:
            continue
        out.append(symbol)
    return out


def _symbol_inventory(symbols_file: Any, map_file: Any) -> dict[str, int]:
    symbols_file = symbols_file() if callable(symbols_file) else symbols_file
    map_file = map_file() if callable(map_file) else map_file
    if symbols_file and map_file:
        raise ConfigError("LmDataset: give orth_symbols_file or orth_symbols_map_file, not both (as RETURNN requires).")
    if symbols_file:
        return read_symbols(symbols_file, "LmDataset")
    if map_file:
        return read_symbol_map(map_file, "LmDataset")
    raise ConfigError(
        "LmDataset: give the symbols: orth_symbols_file (one per line), orth_symbols_map_file ('<symbol> <id>' "
        "lines) or orth_vocab (a vocabulary dict such as {'vocab_file': ..., 'unknown_label': ...})."
    )


def _dtype_for(num_labels: int) -> str:
    """RETURNN's dtype for ``num_labels`` ids: the smallest of int8, uint8, int32, uint32, int64."""
    for dtype, bound in (("int8", 2**7), ("uint8", 2**8), ("int32", 2**31), ("uint32", 2**32)):
        if num_labels <= bound:
            return dtype
    return "int64"


DATASETS = (LmDataset,)
