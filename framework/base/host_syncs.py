"""Host synchronization: reading device values later instead of stalling, and counting the stalls.

On a GPU, every ``.item()``, ``float(t)``, ``bool(t)`` or ``.tolist()`` of a device tensor waits
until the device has done all queued work: the host stops feeding kernels. Per-step checks
therefore decide on the device and hand their verdict to the host through a ``LaggedFlag``,
read a step later when it is long computed. ``HostSyncCounter`` counts the stalls a piece of
code causes (tests and ``tools/benchmark-step.py``).
"""

from __future__ import annotations

import collections
import traceback
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from framework.base.accelerator import has_events, has_pinned_memory, is_accelerator


class LaggedFlag:
    """A device value on its way to host memory; ``read()`` waits only for it, not for the work queued after it.

    Where the backend has pinned memory and events (CUDA, XPU), the copy goes to pinned memory
    without waiting and an event marks its end: ``read()`` a step later finds it done instead of
    draining the queue. On a backend without them, the value stays on the device until ``read()``
    copies it (one host sync, a step later than the value was made). On the CPU the value already is
    in host memory: the flag holds it as it is (a detached alias, no copy; a per-step check makes a
    fresh verdict each step, which nothing changes in place).
    """

    def __init__(self, value: torch.Tensor):
        value = value.detach()
        self.event = None
        self.device_value: torch.Tensor | None = None
        if not is_accelerator(value.device):
            self.host = mark_host_side(value)  # the alias is marked, not the caller's tensor
        elif has_pinned_memory(value.device.type) and has_events(value.device.type):
            self.host = mark_host_side(torch.empty(value.shape, dtype=value.dtype, pin_memory=True))
            self.host.copy_(value, non_blocking=True)
            self.event = torch.Event(value.device)
            self.event.record()
        else:
            self.device_value = value.clone()  # the caller may change its tensor in place after this step

    def read(self) -> torch.Tensor:
        """The value, as a host tensor."""
        if self.device_value is not None:
            self.host, self.device_value = mark_host_side(self.device_value.cpu()), None
        elif self.event is not None:
            self.event.synchronize()
            self.event = None
        return self.host


def mark_host_side(tensor: torch.Tensor) -> torch.Tensor:
    """Mark a CPU tensor that stays on the CPU by design (a batch's ``:seq_len``, a ``LaggedFlag``'s copy): reading
    it never waits for a device, so ``HostSyncCounter`` does not count it on a CPU run either."""
    tensor._host_side = True
    return tensor


_host_value_read = False  # host_value's read is under way: HostSyncCounter does not count it


def host_value(tensor: torch.Tensor) -> float | int | bool:
    """The value of a one-element CPU tensor that a CPU run reads at once instead of deciding on the device:
    nothing waits there, and a Python number costs less than the tensor ops it replaces. ``HostSyncCounter``
    does not count it (on an accelerator the same code keeps the value on the device)."""
    global _host_value_read
    _host_value_read = True
    try:
        return tensor.item()
    finally:
        _host_value_read = False


_aten = torch.ops.aten
# Ops whose output size depends on the values: the host waits for them to know the size.
_DATA_DEPENDENT = {
    _aten.nonzero.default: "nonzero",
    _aten.masked_select.default: "masked_select",
    _aten._unique.default: "unique",
    _aten._unique2.default: "unique",
    _aten.unique_dim.default: "unique",
    _aten.unique_consecutive.default: "unique_consecutive",
    _aten.bincount.default: "bincount",
    _aten.repeat_interleave.Tensor: "repeat_interleave",
}
_INDEXING = (_aten.index.Tensor, _aten.index_put.default, _aten.index_put_.default, _aten._index_put_impl_.default)


class HostSyncCounter(TorchDispatchMode):
    """Count the calls that make the host wait for a device, each named by what waits and its call site.

    Counted: reading a value (``item``, ``float``, ``bool``, ``int``, ``tolist``, ``numpy``), a
    blocking copy from the device to the CPU (``.cpu()``, ``.to("cpu")``), and ops whose output
    size depends on the data (``nonzero``, boolean-mask indexing, ``unique``, ``masked_select``,
    ``repeat_interleave`` without ``output_size``, ``bincount``).

    ``device``: the run's device. On an accelerator only its tensors count: a CPU tensor (the batch's
    ``:seq_len``, a ``LaggedFlag``'s host copy) is read without waiting. On a CPU run nothing truly
    waits, so the CPU stands in for an accelerator: calls on CPU tensors are counted as they would wait
    on a GPU, except those on tensors that stay on the CPU by design (``mark_host_side``); a value
    derived from those is counted (the tensor a CPU run cannot tell apart).
    """

    def __init__(self, device: torch.device | str = "cpu") -> None:
        super().__init__()
        self.device_type = torch.device(device).type
        self.calls: collections.Counter[str] = collections.Counter()  # "file:line (what)" -> count

    def __enter__(self) -> HostSyncCounter:
        # tolist/numpy of a CPU tensor bypass the dispatcher: on a CPU run they are wrapped to be seen.
        self._originals = {name: getattr(torch.Tensor, name) for name in ("tolist", "numpy")}
        for name, original in self._originals.items():
            setattr(torch.Tensor, name, self._counted(name, original))
        return super().__enter__()

    def __exit__(self, *exc: Any) -> None:
        super().__exit__(*exc)
        for name, original in self._originals.items():
            setattr(torch.Tensor, name, original)

    def _counted(self, name: str, method: Any) -> Any:
        def counted(tensor: torch.Tensor, *args: Any, **kwargs: Any) -> Any:
            if self.device_type == "cpu" and self._waits_for(tensor):
                self._count(name)
            return method(tensor, *args, **kwargs)

        return counted

    @property
    def count(self) -> int:
        """How many synchronizing calls were seen."""
        return sum(self.calls.values())

    def _count(self, what: str) -> None:
        self.calls[f"{_caller()} ({what})"] += 1

    def _waits_for(self, value: Any) -> bool:
        """Whether reading ``value`` (a tensor) makes the host wait for the device."""
        if not isinstance(value, torch.Tensor):
            return False
        if self.device_type == "cpu":
            return value.device.type == "cpu" and not getattr(value, "_host_side", False)
        return value.device.type == self.device_type

    def __torch_dispatch__(self, func: Any, types: Any, args: tuple = (), kwargs: dict | None = None) -> Any:
        kwargs = kwargs or {}
        what = self._synchronizes(func, args, kwargs)
        if what is not None:
            self._count(what)
        return func(*args, **kwargs)

    def _synchronizes(self, func: Any, args: tuple, kwargs: dict) -> str | None:
        """What makes the host wait in this call, or None."""
        if func is _aten._local_scalar_dense.default:
            return "value read" if self._waits_for(args[0]) and not _host_value_read else None
        if func in _DATA_DEPENDENT:
            if func is _aten.repeat_interleave.Tensor and kwargs.get("output_size") is not None:
                return None
            return f"{_DATA_DEPENDENT[func]}: output size depends on the data" if self._waits_for(args[0]) else None
        if func in _INDEXING:
            masks = [i for i in args[1] if isinstance(i, torch.Tensor) and i.dtype in (torch.bool, torch.uint8)]
            return "boolean-mask indexing" if any(map(self._waits_for, masks)) else None
        if func in (_aten._to_copy.default, _aten.copy_.default) and self.device_type != "cpu":
            source = args[0] if func is _aten._to_copy.default else args[1]
            target = kwargs.get("device") if func is _aten._to_copy.default else args[0].device
            non_blocking = kwargs.get("non_blocking", False) or (len(args) > 2 and args[2])
            if self._waits_for(source) and target is not None and torch.device(target).type == "cpu":
                return None if non_blocking else "copy to the CPU"
        return None


def _caller() -> str:
    """``file:line`` of the innermost frame outside torch and this module: the code that synchronized."""
    for frame in reversed(traceback.extract_stack()[:-2]):
        if "/torch/" not in frame.filename and frame.filename != __file__:
            return f"{frame.filename}:{frame.lineno}"
    return "?"
