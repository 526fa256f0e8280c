"""What the run's device can do, asked of torch generically (``torch.accelerator``), for any backend.

CUDA, XPU, MPS and out-of-tree (PrivateUse1) backends differ in what they offer: pinned host
memory, events, memory statistics, a device random generator. Each helper here says whether the
device has the feature, so that callers take the fast path where it exists and a stated fallback
where it does not, instead of gating on ``device.type == "cuda"``.
"""

from __future__ import annotations

import functools
from typing import Any

import torch


def is_accelerator(device: torch.device) -> bool:
    """Whether ``device`` is an accelerator (any type but the CPU and the meta device)."""
    return device.type not in ("cpu", "meta")


def device_module(device: torch.device) -> Any:
    """``torch.cuda``, ``torch.xpu``, ``torch.mps`` or a PrivateUse1 backend's module; None for the CPU."""
    return getattr(torch, device.type, None) if is_accelerator(device) else None


@functools.cache
def has_pinned_memory(device_type: str) -> bool:
    """Whether host memory can be pinned for ``device_type`` (then copies to and from it can run asynchronously)."""
    if device_type in ("cpu", "meta"):
        return False
    try:
        return torch.empty(1, pin_memory=True).is_pinned()
    except (RuntimeError, NotImplementedError):  # a backend without a pinned-memory allocator
        return False


@functools.cache
def has_events(device_type: str) -> bool:
    """Whether ``torch.Event`` can be recorded and waited for on ``device_type`` (probed once, at first use)."""
    if device_type in ("cpu", "meta"):
        return False
    try:
        event = torch.Event(torch.device(device_type))
        event.record()
        event.synchronize()
        return True
    except (RuntimeError, NotImplementedError):  # "Backend doesn't support synchronizing events"
        return False


def memory_allocated(device: torch.device) -> int | None:
    """Bytes of tensors allocated on ``device``; None where the backend keeps no memory statistics."""
    stats = memory_stats(device)
    return None if stats is None else stats["allocated"]


def memory_stats(device: torch.device) -> dict[str, int] | None:
    """Allocated and reserved device memory now and at peak (bytes); None where the backend keeps none
    (the CPU, and accelerators whose allocator is not torch's caching allocator)."""
    if not has_memory_stats(device.type):
        return None
    return {
        "allocated": torch.accelerator.memory_allocated(device),
        "max_allocated": torch.accelerator.max_memory_allocated(device),
        "reserved": torch.accelerator.memory_reserved(device),
        "max_reserved": torch.accelerator.max_memory_reserved(device),
    }


@functools.cache
def has_memory_stats(device_type: str) -> bool:
    """Whether ``torch.accelerator`` keeps memory statistics for ``device_type`` (probed once)."""
    if device_type in ("cpu", "meta"):
        return False
    try:
        torch.accelerator.memory_allocated(torch.device(device_type))
        return True
    except (RuntimeError, NotImplementedError):  # "Allocator for ... is not a DeviceAllocator"
        return False


def default_generator(device: torch.device) -> torch.Generator | None:
    """The default random generator of accelerator ``device``; None for the CPU and for backends whose random
    numbers come from the CPU's generator or that expose none."""
    generators = getattr(device_module(device), "default_generators", None)
    if not generators:
        return None
    index = device.index if device.index is not None else torch.accelerator.current_device_index()
    return generators[index]
