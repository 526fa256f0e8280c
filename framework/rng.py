"""Seeding and capturing every random number generator a training run uses."""

from __future__ import annotations

import random
from typing import Any

import numpy as np
import torch


def seed_everything(seed: int) -> None:
    """Seed Python's, numpy's and torch's (all devices) generators."""
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)


def get_rng_state(host: bool = True) -> dict[str, Any]:
    """Generator states, in a form that ``torch.load(weights_only=True)`` accepts.

    ``host=False`` leaves out Python's and numpy's generators (torch's alone takes ~2 us).
    """
    state: dict[str, Any] = {"torch": torch.get_rng_state()}
    if torch.cuda.is_initialized():
        state["cuda"] = torch.cuda.get_rng_state_all()
    if not host:
        return state
    kind, keys, pos, has_gauss, cached_gauss = np.random.get_state()
    state.update(
        {
            "python": random.getstate(),
            "numpy": {
                "kind": kind,
                "keys": torch.from_numpy(keys.astype(np.int64)),
                "pos": int(pos),
                "has_gauss": int(has_gauss),
                "cached_gaussian": float(cached_gauss),
            },
        }
    )
    return state


def set_rng_state(state: dict[str, Any]) -> None:
    """Restore what ``get_rng_state`` captured."""
    torch.set_rng_state(state["torch"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])
    if "python" not in state:
        return
    random.setstate(_as_tuples(state["python"]))
    np_state = state["numpy"]
    np.random.set_state(
        (
            np_state["kind"],
            np_state["keys"].numpy().astype(np.uint32),
            np_state["pos"],
            np_state["has_gauss"],
            np_state["cached_gaussian"],
        )
    )


def _as_tuples(value: Any) -> Any:
    # random.setstate wants tuples; a serialization round trip may hand back lists.
    return tuple(_as_tuples(v) for v in value) if isinstance(value, (list, tuple)) else value
