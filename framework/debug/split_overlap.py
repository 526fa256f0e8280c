"""Evaluation data that is also training data (``debug_split_overlap``, on by default).

At startup every sequence of train and of each evaluation dataset is hashed (all keys, exact
bytes and shapes); an evaluation sequence whose hash is among train's is a copy. A dev set that
overlaps train (a copy of the same files, the same generator seed, a split done twice) scores
what the model memorized: its score is too good and early stopping trusts it. Reported with the
count and example index pairs; natural duplicates are a note: a handful (below ``MIN_SHARE`` of
the set, or a single sequence), or no more than train repeats its own sequences (short token
sequences from a small vocabulary do). In-memory datasets are hashed from their arrays (about
0.1 s per 100k small sequences, up to ``LIMIT``); others through ``get_seq``, up to
``READ_LIMIT`` sequences.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from framework.base.config import Config
from framework.base.errors import DataError
from framework.base.findings import Finding
from framework.base.options import register
from framework.core.events import Event, Order
from framework.core.plugin import Plugin, on
from framework.core.state import RunState
from framework.datasets.numpy_dataset import NumpyDataset
from framework.debug.sanity import report_findings

register(
    "debug_split_overlap",
    "bool",
    True,
    "At startup, hash every sequence and report dev/eval sequences that are copies of train sequences.",
    __name__,
)

LIMIT = 1_000_000  # sequences of an in-memory dataset hashed, at most
READ_LIMIT = 20_000  # sequences of another dataset read and hashed (each one a get_seq call), at most
MIN_SHARE = 0.01  # an overlap below this share of the evaluation set is a note (natural duplicates)
NATURAL_FACTOR = 3  # an overlap up to this many times the rate of duplicates within train is a note too


def _key_hashes(value: Any, count: int) -> list[int]:
    if isinstance(value, np.ndarray):
        rows = np.ascontiguousarray(value[:count])
        return [hash(row.tobytes()) for row in rows.reshape(len(rows), -1)] if len(rows) else []
    # A list of arrays, or Ragged variable-length data (which is indexed one sequence at a time)
    return [
        hash((a.shape, np.ascontiguousarray(a).tobytes())) for a in (value[i] for i in range(min(count, len(value))))
    ]


def sequence_hashes(dataset: Any) -> tuple[list[int], bool]:
    """One hash per sequence over all its keys; and whether the dataset was cut at ``LIMIT``."""
    if isinstance(dataset, NumpyDataset):
        count = min(dataset.num_seqs, LIMIT)
        per_key = [_key_hashes(dataset.arrays[k], count) for k in sorted(dataset.arrays)]
        return [hash(t) for t in zip(*per_key, strict=True)], count < dataset.num_seqs
    count = min(dataset.num_seqs, READ_LIMIT)
    hashes = []
    for i in range(count):
        seq = dataset.get_seq(i)
        hashes.append(hash(tuple((k, seq[k].shape, np.ascontiguousarray(seq[k]).tobytes()) for k in sorted(seq))))
    return hashes, count < dataset.num_seqs


def overlap_findings(train: tuple[list[int], bool], others: dict[str, tuple[list[int], bool]]) -> list[Finding]:
    """Findings for the evaluation datasets whose sequences are also in train.

    Short sequences from a small vocabulary repeat by nature; how often is measured on train itself
    (the share of train sequences that copy an earlier one): an overlap that this rate explains, or
    a single sequence, is a note.
    """
    train_hashes, train_cut = train
    first_in_train: dict[int, int] = {}
    for index, h in enumerate(train_hashes):
        first_in_train.setdefault(h, index)
    # A sequence drawn like train's meets on average twice as many earlier train sequences as a train sequence does.
    natural = 2 * (len(train_hashes) - len(first_in_train)) / max(len(train_hashes), 1)
    findings = []
    for option, (hashes, cut) in others.items():
        pairs = [(i, first_in_train[h]) for i, h in enumerate(hashes) if h in first_in_train]
        if not pairs:
            continue
        share = len(pairs) / len(hashes)
        examples = ", ".join(f"{option}[{i}] = train[{j}]" for i, j in pairs[:3])
        scope = " (among the sequences hashed: the first ones of a large dataset)" if train_cut or cut else ""
        text = (
            f"{len(pairs)} of the {len(hashes)} sequences of {option!r} ({share:.1%}) are exact copies of train "
            f"sequences{scope}, e.g. {examples}"
        )
        evidence = {"copies": len(pairs), "sequences": len(hashes), "share": share, "train_repeats": natural / 2}
        where = {"dataset": option, "copies": [{option: i, "train": j} for i, j in pairs[:3]]}
        if share < MIN_SHARE or len(pairs) < 2 or share <= NATURAL_FACTOR * natural:
            if share >= MIN_SHARE and natural > 0:
                text += f" (train itself repeats {natural / 2:.1%} of its sequences: natural duplicates)"
            findings.append(Finding("note", "sanity check", text + ".", evidence=evidence, where=where))
            continue
        findings.append(
            Finding(
                "warning",
                "sanity check",
                text + f". The {option} score then measures memorization, not generalization, and early stopping or "
                f"learning-rate control trusts it. Check that {option} comes from other files than train, or from "
                f"another seed (data_seed, or fixed_random_seed for Task12AXDataset) of a generated dataset.",
                evidence=evidence,
                where=where,
                fix=f"Make {option} from other files than train, or from another seed of a generated dataset.",
            )
        )
    return findings


class SplitOverlap(Plugin):
    """Hashes the datasets at STARTUP and reports evaluation sequences found in train."""

    bug_check = ("debug_split_overlap",)

    order = Order.CHECK

    @classmethod
    def from_config(cls, config: Config, state: RunState) -> SplitOverlap | None:
        return cls() if config.bool("debug_split_overlap") else None

    @on(Event.STARTUP)
    def check(self, state: RunState) -> None:
        if "train" not in state.loaders or len(state.loaders) < 2:
            return
        train = sequence_hashes(state.loaders["train"].dataset)
        others = {o: sequence_hashes(loader.dataset) for o, loader in state.loaders.items() if o != "train"}
        findings = overlap_findings(train, others)
        report_findings(state, "data", findings, DataError, False, off="debug_split_overlap = False")


PLUGINS = (SplitOverlap,)
