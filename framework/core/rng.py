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


def get_rng_state() -> dict[str, Any]:
    """Every generator's state, in a form that ``torch.load(weights_only=True)`` accepts."""
    state: dict[str, Any] = {"torch": torch.get_rng_state()}
    if torch.cuda.is_initialized():
        state["cuda"] = torch.cuda.get_rng_state_all()
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


def capture_step_rng(device: torch.device) -> dict[str, Any]:
    """torch's generators of the CPU and ``device``, to replay one step: every step, so without a host sync.

    A CUDA generator is snapshot with ``clone_state`` (its seed and offset live on the host);
    ``get_rng_state_all`` would touch every GPU. ``saveable_rng`` turns it into tensors for a file.
    """
    state: dict[str, Any] = {"torch": torch.get_rng_state()}
    if device.type == "cuda":
        index = device.index if device.index is not None else torch.cuda.current_device()
        state["cuda_generator"] = (index, torch.cuda.default_generators[index].clone_state())
    return state


def saveable_rng(state: dict[str, Any]) -> dict[str, Any]:
    """``capture_step_rng``'s snapshot as tensors (for ``torch.save`` and ``weights_only`` loading)."""
    if "cuda_generator" not in state:
        return state
    state = dict(state)
    index, generator = state.pop("cuda_generator")
    state["cuda_device"] = {"index": index, "state": generator.get_state()}
    return state


def set_rng_state(state: dict[str, Any]) -> None:
    """Restore what ``get_rng_state`` or ``capture_step_rng`` captured."""
    torch.set_rng_state(state["torch"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])
    if "cuda_generator" in state:
        index, generator = state["cuda_generator"]
        torch.cuda.set_rng_state(generator.get_state(), index)
    if "cuda_device" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state(state["cuda_device"]["state"], state["cuda_device"]["index"])
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
