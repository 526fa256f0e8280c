"""Seeding and capturing every random number generator a training run uses."""

from __future__ import annotations

import contextlib
import random
from collections.abc import Iterator
from typing import Any

import numpy as np
import torch

from framework.base.accelerator import default_generator, device_module


def seed_everything(seed: int) -> None:
    """Seed Python's, numpy's and torch's (all devices) generators."""
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)


def get_rng_state() -> dict[str, Any]:
    """Every generator's state, in a form that ``torch.load(weights_only=True)`` accepts."""
    state: dict[str, Any] = {"torch": torch.get_rng_state()}
    accelerator = torch.accelerator.current_accelerator()
    module = getattr(torch, accelerator.type, None) if accelerator is not None else None
    if module is not None and hasattr(module, "get_rng_state_all") and module.is_initialized():
        state["accelerator"] = {"type": accelerator.type, "states": module.get_rng_state_all()}
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

    An accelerator's generator is snapshot with ``clone_state`` (on CUDA its seed and offset live on the
    host); ``get_rng_state_all`` would touch every device. A backend without its own default generator
    draws from the CPU's. ``saveable_rng`` turns the snapshot into tensors for a file.
    """
    state: dict[str, Any] = {"torch": torch.get_rng_state()}
    generator = default_generator(device)
    if generator is not None:
        state["device_generator"] = (generator, generator.clone_state())
    return state


def saveable_rng(state: dict[str, Any]) -> dict[str, Any]:
    """``capture_step_rng``'s snapshot as tensors (for ``torch.save`` and ``weights_only`` loading)."""
    if "device_generator" not in state:
        return state
    state = dict(state)
    generator, snapshot = state.pop("device_generator")
    state["device_rng"] = {"device": str(generator.device), "state": snapshot.get_state()}
    return state


def set_rng_state(state: dict[str, Any]) -> None:
    """Restore what ``get_rng_state`` or ``capture_step_rng`` captured."""
    torch.set_rng_state(state["torch"])
    if "cuda" in state and torch.cuda.is_available():  # written by get_rng_state before it named the accelerator
        torch.cuda.set_rng_state_all(state["cuda"])
    saved = state.get("accelerator")
    module = getattr(torch, saved["type"], None) if saved is not None else None
    if module is not None and module.is_available():  # a run resumed without that accelerator draws anew there
        module.set_rng_state_all(saved["states"])
    if "device_generator" in state:
        generator, snapshot = state["device_generator"]
        generator.set_state(snapshot.get_state())
    if "device_rng" in state:  # a saved step, replayed in a new process: the device may not be initialized yet
        device = torch.device(state["device_rng"]["device"])
        module = device_module(device)
        if module is not None and module.is_available():
            module.set_rng_state(state["device_rng"]["state"], device)
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


@contextlib.contextmanager
def objects_random_state_kept(obj: Any, depth: int = 2) -> Iterator[None]:
    """Within the block, reading ``obj`` (a dataset) may draw from the generators it holds as attributes (numpy's
    Generator and RandomState, Python's Random, torch's Generator; also in the objects and containers its attributes
    hold, ``depth`` steps from ``obj`` in all): afterwards each is as it was, so a check that reads a few batches
    leaves the run's own draws alone."""
    saved = []
    for generator in _held_generators(obj, depth, set()):
        if isinstance(generator, np.random.Generator):
            saved.append((generator.bit_generator, "state", generator.bit_generator.state))
        elif isinstance(generator, np.random.RandomState):
            saved.append((generator, "set_state", generator.get_state()))
        elif isinstance(generator, random.Random):
            saved.append((generator, "setstate", generator.getstate()))
        else:
            saved.append((generator, "set_state", generator.get_state()))
    try:
        yield
    finally:
        for owner, how, state in saved:
            if how == "state":
                owner.state = state
            else:
                getattr(owner, how)(state)


_GENERATORS = (np.random.Generator, np.random.RandomState, random.Random, torch.Generator)


def _held_generators(obj: Any, depth: int, seen: set[int]) -> Iterator[Any]:
    """The generators at most ``depth`` steps from ``obj`` (``obj`` itself at 0). A container is only scanned when its
    entries are within reach: a dataset's list of a million arrays two steps away holds none that count, and reading
    it took a second at every sample."""
    if isinstance(obj, _GENERATORS):
        yield obj
        return
    if id(obj) in seen or depth < 1:
        return
    seen.add(id(obj))
    if isinstance(obj, (list, tuple)):
        values = list(obj)
    elif isinstance(obj, dict):
        values = list(obj.values())
    else:
        values = list(getattr(obj, "__dict__", {}).values())
    for value in values:
        if isinstance(value, _GENERATORS):
            if id(value) not in seen:  # one generator held in two places is kept once
                seen.add(id(value))
                yield value
        elif depth > 1 and (hasattr(value, "__dict__") or isinstance(value, (list, tuple, dict))):
            if not isinstance(value, (np.ndarray, torch.Tensor, type)):
                yield from _held_generators(value, depth - 1, seen)
