"""Does a dataset's length agree with what it returns? Two paths that must agree: ``num_seqs`` (what every epoch
plans) and ``get_seq`` (what the data holds).

A dataset class of the user's that counts the wrong thing (``len`` of an outer ``[inputs, labels]`` list, of a dict
of arrays, of the list of files instead of the examples in them) trains on the first few examples every epoch, and
nothing fails. Its ``get_seq`` still answers for the indices past that length, up to the real end. The experiment
asks it for the first index past ``num_seqs`` and then for indices twice as far, up to ``PROBES`` calls, with the
random states kept. A dataset that wraps around (index modulo its size) returns its first sequence again, one that
answers for every index asked makes its sequences from the index (a generator), and one that serves less than
``FAR`` times its length is a view of a larger array (a split, a subset): none is reported.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from framework.base.findings import Finding
from framework.base.rng import get_rng_state, objects_random_state_kept, set_rng_state
from framework.check_library.tensors import is_user_class
from framework.datasets.base import Dataset

PROBES = 25  # indices asked past the length: num_seqs, 2 num_seqs, 4 num_seqs, ... (at most 2**24 times it)
# get_seq must serve at least this many times num_seqs: a class that counts the wrong thing misses most of its data
# (an outer [inputs, labels] list: 2 of thousands); a view of a larger array (a train/dev split of one array without
# a bounds check of its own, a deliberate subset) serves a few times its length at most.
FAR = 8


def _answers(dataset: Dataset, index: int) -> dict[str, Any] | None:
    try:
        seq = dataset.get_seq(index)
    except Exception:  # noqa: BLE001 - IndexError, KeyError, whatever the class raises past its end
        return None
    return seq if isinstance(seq, dict) and seq else None


def _same(a: dict[str, Any], b: dict[str, Any]) -> bool:
    return a.keys() == b.keys() and all(np.array_equal(np.asarray(a[k]), np.asarray(b[k])) for k in a)


def length_finding(option: str, dataset: Dataset) -> Finding | None:
    """A warning when the user's dataset class returns sequences past its ``num_seqs`` that differ from its first
    (``option``: the dataset's option name, as the findings name it)."""
    if not is_user_class(type(dataset)) or not getattr(dataset, "get_seq", None):
        return None  # the framework's and libraries' classes are tested against their lengths
    n = dataset.num_seqs
    if not isinstance(n, int) or n <= 0:
        return None
    rng = get_rng_state()
    try:
        with objects_random_state_kept(dataset):
            first, past = _answers(dataset, 0), _answers(dataset, n)
            if first is None or past is None or _same(first, past):
                return None  # ends at num_seqs, or wraps around to its first sequence
            last, ends = n, False
            for k in range(1, PROBES):
                answer = _answers(dataset, n << k)
                if answer is None or _same(first, answer):
                    ends = True
                    break
                last = n << k
    finally:
        set_rng_state(rng)
    if not ends or last < FAR * n:
        return None  # answers for any index (a generator), or a view of a somewhat larger array
    trains = "every epoch trains on" if option == "train" else f"{option} scores"
    return Finding(
        "warning",
        "sanity check",
        f"dataset {option!r} ({dataset.name}) says it holds {n} sequence(s) (num_seqs), but get_seq returns other "
        f"sequences past that, up to index {last} at least ({last // n}x as many): {trains} the first {n} only. Its "
        f"length counts something else than the sequences (len of an outer [inputs, labels] list, of a dict of "
        f"arrays, of the files instead of the examples in them).",
        evidence={"num_seqs": n, "answers_up_to": last},
        where={"dataset": option, "class": type(dataset).__name__},
        fix=f"Make {type(dataset).__name__}.num_seqs count the sequences get_seq serves.",
    )
