"""Random generators that a dataset owns, copied into DataLoader workers, and reseeding them there.

torch seeds its own generator, Python's ``random`` and numpy's global generator differently in each
worker process. A generator the dataset keeps as an attribute (``self.rng =
np.random.default_rng(0)``, ``random.Random(seed)``, a ``torch.Generator``, also inside an
augmentation object) is copied into every worker in the state it has in the main process, where
workers never advance it: every worker draws the same numbers, and so does every epoch (its
workers are made anew from the same state). ``repeating_generators`` finds the owned generators
that ``get_batch`` draws from; ``worker_init`` reseeds them in each worker from torch's worker
seed (different per worker and epoch, reproducible from ``random_seed``), mixed with their own
state, so that different seeds of the user still give different streams.
"""

from __future__ import annotations

import pickle
import random
import types
import zlib
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import torch

from framework.base.rng import get_rng_state, set_rng_state

GENERATORS = (np.random.Generator, np.random.RandomState, random.Random, torch.Generator)
_SKIPPED = (
    np.ndarray,
    torch.Tensor,
    str,
    bytes,
    int,
    float,
    type,
    types.ModuleType,
    types.FunctionType,
    types.MethodType,
)


def owned_generators(dataset: Any, depth: int = 3) -> dict[str, Any]:
    """The random generators reachable from ``dataset``'s attributes: ``{"rng": gen, "augment.generator": gen}``."""
    found: dict[str, Any] = {}
    seen: set[int] = set()
    for path, value in _walk(dataset, "", depth, seen):
        found.setdefault(path, value)
    return found


def _walk(value: Any, path: str, depth: int, seen: set[int]) -> Iterator[tuple[str, Any]]:
    if id(value) in seen or depth < 0 or isinstance(value, _SKIPPED):
        return
    seen.add(id(value))
    if isinstance(value, GENERATORS):
        yield path, value
        return
    if isinstance(value, dict):
        items = [(f"{path}[{k!r}]", v) for k, v in value.items()]
    elif isinstance(value, (list, tuple)):
        items = [(f"{path}[{i}]", v) for i, v in enumerate(value[:32])]  # a list of sequences is data
    elif hasattr(value, "__dict__"):
        items = [(f"{path}.{k}" if path else k, v) for k, v in vars(value).items()]
    else:
        return
    for child_path, child in items:
        yield from _walk(child, child_path, depth - 1, seen)


def get_state(generator: Any) -> Any:
    """A copy of ``generator``'s state."""
    if isinstance(generator, np.random.Generator):
        return generator.bit_generator.state
    if isinstance(generator, np.random.RandomState):
        return generator.get_state()
    if isinstance(generator, random.Random):
        return generator.getstate()
    return generator.get_state()


def set_state(generator: Any, state: Any) -> None:
    """Put ``generator`` back into ``state`` (from ``get_state``)."""
    if isinstance(generator, np.random.Generator):
        generator.bit_generator.state = state
    elif isinstance(generator, np.random.RandomState):
        generator.set_state(state)
    elif isinstance(generator, random.Random):
        generator.setstate(state)
    else:
        generator.set_state(state)


def _fingerprint(state: Any) -> int:
    data = state.numpy().tobytes() if isinstance(state, torch.Tensor) else pickle.dumps(state)
    return zlib.crc32(data)


def _same_batch(a: dict[str, np.ndarray], b: dict[str, np.ndarray]) -> bool:
    return a.keys() == b.keys() and all(np.array_equal(a[k], b[k]) for k in a)


def repeating_generators(dataset: Any, indices: np.ndarray) -> dict[str, Any]:
    """The owned generators (by attribute path) that ``dataset.get_batch(indices)`` draws from and whose state
    decides what it returns: what a worker's copy of them repeats. Every state is restored afterwards."""
    generators = owned_generators(dataset)
    if not generators:
        return {}
    saved = {path: get_state(g) for path, g in generators.items()}
    rng = get_rng_state()
    try:
        first = dataset.get_batch(indices)
        advanced = {p: g for p, g in generators.items() if _fingerprint(get_state(g)) != _fingerprint(saved[p])}
        if not advanced:
            return {}
        second = dataset.get_batch(indices)  # the streams go on: a random dataset returns something else
        for path, generator in generators.items():
            set_state(generator, saved[path])
        set_rng_state(rng)
        again = dataset.get_batch(indices)  # the state every worker's copy starts from: the same batch again
        return advanced if _same_batch(first, again) and not _same_batch(first, second) else {}
    finally:
        for path, generator in generators.items():
            set_state(generator, saved[path])
        set_rng_state(rng)


def worker_init(paths: tuple[str, ...], user_init: Callable[[int], None] | None, worker_id: int) -> None:
    """DataLoader ``worker_init_fn``: reseed the dataset's generators at ``paths``, then run the user's own."""
    info = torch.utils.data.get_worker_info()
    generators = owned_generators(info.dataset.loader.dataset)
    for k, path in enumerate(paths):
        generator = generators.get(path)
        if generator is None:
            continue
        sequence = np.random.SeedSequence([info.seed, k, _fingerprint(get_state(generator))])
        if isinstance(generator, np.random.Generator):
            generator.bit_generator.state = type(generator.bit_generator)(sequence).state
        elif isinstance(generator, np.random.RandomState):
            generator.seed(sequence.generate_state(4))
        elif isinstance(generator, random.Random):
            generator.seed(int(sequence.generate_state(1, np.uint64)[0]))
        else:
            generator.manual_seed(int(sequence.generate_state(1, np.uint64)[0]))
    if user_init is not None:
        user_init(worker_id)
