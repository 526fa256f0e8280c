"""RETURNN's sequence orderings (``Dataset.get_seq_order_for_epoch`` in returnn/datasets/basic.py), draw for draw.

``returnn_order`` gives a full epoch's order of ``n`` sequences for a ``seq_ordering`` string, with the random
generator that ``rng_for(nth)`` returns for orderings that draw (``nth``: the ordering's "keep the seed for nth
epochs" field, 1 when not given). RETURNN's generator is ``numpy.random.RandomState(seed)`` with its seed
(``returnn_seed``): ``fixed_random_seed`` if set, else the full epoch (counted in steps of nth) plus
``random_seed_offset``; the config's ``random_seed`` plays no part. The orderings:

- "default", "reverse", "default_every_n:N", "sorted", "sorted_reverse" (by length, stable);
- "random" / "random:nth": a permutation; "random_sample" / "random_sample:nth": n draws with replacement;
- "laplace", "laplace:B", "laplace:.S", each with an optional ":nth": a permutation cut into B bins (2; or
  ``max(n // S, 2)``), each sorted by length, every second one longest first;
- "sort_bin_shuffle" (and "sort_bin_shuffle_x2"), same fields: a permutation sorted by length, cut into bins whose
  order is shuffled (x2: each bin shuffled too).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

#: The families of ``seq_ordering`` names (with their optional ":..." fields) that RETURNN accepts.
ORDERING_FAMILIES = (
    "default",
    "reverse",
    "default_every_n:N",
    "sorted",
    "sorted_reverse",
    "random[:nth]",
    "random_sample[:nth]",
    "laplace[:N|:.N[:nth]]",
    "sort_bin_shuffle[:N|:.N[:nth]]",
    "sort_bin_shuffle_x2[:N|:.N[:nth]]",
)


def parse_ordering(ordering: Any) -> tuple[str, list[str]] | None:
    """(family, fields) of a valid ``seq_ordering`` string, None for one RETURNN would refuse (a ValueError there)."""
    if not isinstance(ordering, str):
        return None
    name, *fields = ordering.split(":")
    if name in ("default", "reverse", "sorted", "sorted_reverse") and not fields:
        return name, fields
    if name == "default_every_n":
        return (name, fields) if len(fields) == 1 and _positive(fields[0]) else None
    if name in ("random", "random_sample"):
        return (name, fields) if len(fields) <= 1 and all(_positive(f) for f in fields) else None
    if name in ("laplace", "sort_bin_shuffle", "sort_bin_shuffle_x2"):
        if len(fields) > 2 or (fields and not _positive(fields[0].removeprefix("."))):
            return None
        return (name, fields) if len(fields) < 2 or _positive(fields[1]) else None
    return None


def _positive(text: str) -> bool:
    return text.isdigit() and int(text) > 0


def nth_of(ordering: str) -> int:
    """The ordering's "same seed for nth epochs" field (1 when it has none or does not draw)."""
    parsed = parse_ordering(ordering)
    if parsed is None:
        return 1
    name, fields = parsed
    if name in ("random", "random_sample"):
        return int(fields[0]) if fields else 1
    if name in ("laplace", "sort_bin_shuffle", "sort_bin_shuffle_x2"):
        return int(fields[1]) if len(fields) > 1 else 1
    return 1


def returnn_seed(full_epoch: int, nth: int, random_seed_offset: int, fixed_random_seed: int | None) -> int:
    """RETURNN's ``Dataset._get_random_seed_for_epoch`` for a sub-epoch of ``full_epoch`` (1-based)."""
    if fixed_random_seed is not None:
        return fixed_random_seed
    seed = full_epoch
    if nth > 1:
        seed = (seed - 1) // nth + 1
    return seed + random_seed_offset


def _bins(fields: list[str], n: int) -> int:
    if not fields:
        return 2
    if fields[0].startswith("."):  # about this many sequences per bin
        return max(n // int(fields[0][1:]), 2)
    return int(fields[0])


def returnn_order(ordering: str, n: int, lengths_of_all: Callable[[], np.ndarray], rng_for: Callable[[int], Any]):
    """The positions 0 .. n - 1 in RETURNN's order for ``ordering`` (see the module doc); ``lengths_of_all()`` gives
    the n lengths the sorting orderings sort by, ``rng_for(nth)`` the generator of the drawing ones."""
    parsed = parse_ordering(ordering)
    if parsed is None:
        raise ValueError(f"invalid seq_ordering {ordering!r}")
    name, fields = parsed
    if n == 0:
        return np.zeros(0, dtype=np.int64)
    if name == "default":
        return np.arange(n)
    if name == "reverse":
        return np.arange(n - 1, -1, -1)
    if name == "default_every_n":
        num = int(fields[0])
        seq_index = np.arange(n // num, dtype=np.int64).repeat(num)
        for i in range(1, num):
            seq_index[i::num] += i * (n // num)
        return seq_index
    if name in ("sorted", "sorted_reverse"):
        lengths = np.asarray(lengths_of_all())
        return np.argsort(-lengths if name == "sorted_reverse" else lengths, kind="stable")
    rng = rng_for(nth_of(ordering))
    if name == "random":
        return rng.permutation(n)
    if name == "random_sample":
        draw = rng.randint if hasattr(rng, "randint") else rng.integers
        return np.asarray(draw(0, n, size=n), dtype=np.int64)
    lengths = np.asarray(lengths_of_all())
    bins = _bins(fields, n)
    if name == "laplace":
        seq_index = rng.permutation(n)
        out = []
        for i in range(bins):
            part = seq_index[i * n // bins : (i + 1) * n // bins]
            part_lengths = -lengths[part] if i % 2 == 1 else lengths[part]
            out.append(part[np.argsort(part_lengths, kind="stable")])
        return np.concatenate(out).astype(np.int64)
    # sort_bin_shuffle(_x2): Python lists as RETURNN has them (its bin shuffle draws on a list)
    seq_list = rng.permutation(n).tolist()
    seq_list.sort(key=lambda i: lengths[i])  # shortest first, stable
    out = []
    for i in rng.permutation(bins):
        part = seq_list[i * n // bins :] if i == bins - 1 else seq_list[i * n // bins : (i + 1) * n // bins]
        if name == "sort_bin_shuffle_x2":
            rng.shuffle(part)
        out.append(part)
    return np.concatenate(out).astype(np.int64)
