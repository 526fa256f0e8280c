"""RETURNN's classic toy task: 12AX, a sequence task that needs memory."""

from __future__ import annotations

from typing import Any

import numpy as np

from framework.base.config import get_global_config
from framework.base.errors import ConfigError
from framework.datasets.numpy_dataset import NumpyDataset

SYMBOLS = "123ABCXYZ"


def label_12ax(symbols: str) -> np.ndarray:
    """Per-frame targets: 1 where the current symbol completes A-X after a 1, or B-Y after a 2."""
    labels = np.zeros(len(symbols), dtype=np.int64)
    context = None
    for t, symbol in enumerate(symbols):
        if symbol in "12":
            context = symbol
        elif t > 0 and (context, symbols[t - 1], symbol) in (("1", "A", "X"), ("2", "B", "Y")):
            labels[t] = 1
    return labels


class Task12AXDataset(NumpyDataset):
    """Variable-length sequences over ``123ABCXYZ``; the target at each frame is 1 iff the frame
    closes the pattern selected by the last digit (1: A then X; 2: B then Y), else 0.

    Keys: ``data`` [T] int64 (sparse_dim 9), ``classes`` [T] int64 (sparse_dim 2). A config that
    declares ``data`` dense (RETURNN's ``{"dim": 9}``) gets RETURNN's one-hot vectors instead.

    :param num_seqs: number of sequences.
    :param fixed_random_seed: RETURNN's parameter: the sequences (and their shuffling) come from this
        seed, whatever the config's ``random_seed``; the usual way to fix a dev set. None: drawn from
        the config's ``random_seed``. Unlike RETURNN, which draws new sequences every epoch, the
        sequences are drawn once, so a step can be replayed and the checks see what is trained on.
    :param min_len: shortest sequence length; ``max_len`` the longest.
    """

    returnn_window = "stacks one-hot"  # what RETURNN's class does with window (context_window.py)
    returnn_worker_shards = True  # RETURNN's class shards over DataLoader workers (supports_sharding)
    returnn_eval_sorted = False  # RETURNN's generated datasets reset a dev/eval "sorted" to "default"

    labels = {"data": list(SYMBOLS), "classes": ["no", "yes"]}  # by class id, as RETURNN's Dataset.labels

    def __init__(
        self,
        *,
        num_seqs: int = 1000,
        min_len: int = 10,
        max_len: int = 50,
        fixed_random_seed: int | None = None,
        random_seed: int | None = 0,
        **kwargs: Any,
    ):
        # Not default_rng(random_seed): a seed written in a config (fixed_random_seed=1) must never draw
        # the same sequences as a run's random_seed=1. A RETURNN config (random_seed None: RETURNN's orders) draws
        # them from its random_seed all the same.
        drawn_from = _run_seed() if random_seed is None else random_seed
        seed = fixed_random_seed if fixed_random_seed is not None else np.random.SeedSequence([drawn_from, 0x12A])
        rng = np.random.default_rng(seed)
        inputs, targets = [], []
        for _ in range(num_seqs):
            symbols = _generate(rng, int(rng.integers(min_len, max_len + 1)))
            inputs.append(np.array([SYMBOLS.index(s) for s in symbols], dtype=np.int64))
            targets.append(label_12ax(symbols))
        super().__init__(
            {"data": inputs, "classes": targets},
            sparse_dims={"data": 9, "classes": 2},
            fixed_random_seed=fixed_random_seed,
            random_seed=random_seed,
            **kwargs,
        )


def _generate(rng: np.random.Generator, length: int) -> str:
    # Digits change the context now and then; in between come letter pairs, biased towards the
    # A-X / B-Y patterns so that both targets occur often, plus distractors (3, C, Z).
    out = [str(rng.choice(["1", "2"]))]
    while len(out) < length:
        r = rng.random()
        if r < 0.1:
            out.append(str(rng.choice(["1", "2", "3"])))
        elif r < 0.8:
            out.extend([str(rng.choice(["A", "B"])), str(rng.choice(["X", "Y"]))])
        else:
            out.append(str(rng.choice(list("ABCXYZ"))))
    return "".join(out[:length])


DATASETS = (Task12AXDataset,)


def _run_seed() -> int:
    """The run's ``random_seed`` (0 outside a run: a dataset built by a test or a tool)."""
    try:
        return get_global_config().int("random_seed")
    except ConfigError:  # no config loaded
        return 0
