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


class LaggedFlag:
    """A device tensor copied to host memory without waiting; ``read()`` waits only for that copy.

    On CUDA the copy goes to pinned memory behind an event; ``read()`` a step later finds it done
    instead of draining the queue. On the CPU the copy is immediate.
    """

    def __init__(self, value: torch.Tensor):
        cuda = value.device.type == "cuda"
        self.host = torch.empty(value.shape, dtype=value.dtype, pin_memory=cuda)
        self.host.copy_(value.detach(), non_blocking=cuda)
        self.host._host_side = True  # what HostSyncCounter does not count: no device is waited for
        self.event = None
        if cuda:
            self.event = torch.cuda.Event()
            self.event.record()

    def read(self) -> torch.Tensor:
        """The value, as a host tensor."""
        if self.event is not None:
            self.event.synchronize()
        return self.host


class HostSyncCounter(TorchDispatchMode):
    """Count the calls that make the host wait for a device value, with where they came from.

    Counted: ``aten._local_scalar_dense`` (``item``, ``float``, ``bool``, ``int``), ``tolist()``
    and ``numpy()`` on any tensor but a ``LaggedFlag``'s host copy, and copies from a GPU to the
    CPU. On a CPU run nothing truly waits, but the same calls would wait on a GPU, so they are
    counted too (``tolist``/``numpy`` of a CPU tensor bypass the dispatcher: they are wrapped).
    """

    def __init__(self) -> None:
        super().__init__()
        self.calls: collections.Counter[str] = collections.Counter()

    def __enter__(self) -> HostSyncCounter:
        self._originals = {name: getattr(torch.Tensor, name) for name in ("tolist", "numpy")}
        for name, original in self._originals.items():
            setattr(torch.Tensor, name, self._counted(original))
        return super().__enter__()

    def __exit__(self, *exc: Any) -> None:
        super().__exit__(*exc)
        for name, original in self._originals.items():
            setattr(torch.Tensor, name, original)

    def _counted(self, method: Any) -> Any:
        def counted(tensor: torch.Tensor, *args: Any, **kwargs: Any) -> Any:
            if tensor.device.type == "cpu" and not getattr(tensor, "_host_side", False):
                self.calls[_caller()] += 1
            return method(tensor, *args, **kwargs)

        return counted

    @property
    def count(self) -> int:
        """How many synchronizing calls were seen."""
        return sum(self.calls.values())

    def __torch_dispatch__(self, func: Any, types: Any, args: tuple = (), kwargs: dict | None = None) -> Any:
        if self._synchronizes(func, args, kwargs or {}):
            self.calls[_caller()] += 1
        return func(*args, **(kwargs or {}))

    def _synchronizes(self, func: Any, args: tuple, kwargs: dict) -> bool:
        if func is torch.ops.aten._local_scalar_dense.default:
            return not getattr(args[0], "_host_side", False)
        if func in (torch.ops.aten._to_copy.default, torch.ops.aten.copy_.default):
            source = args[0] if func is torch.ops.aten._to_copy.default else args[1]
            target = kwargs.get("device") if func is torch.ops.aten._to_copy.default else args[0].device
            non_blocking = kwargs.get("non_blocking", False) or (len(args) > 2 and args[2])
            return (
                isinstance(source, torch.Tensor)
                and source.device.type not in ("cpu", "meta")
                and target is not None
                and torch.device(target).type == "cpu"
                and not non_blocking
            )
        return False


def _caller() -> str:
    """``file:line`` of the innermost frame outside torch, to say which code synchronized."""
    for frame in reversed(traceback.extract_stack()[:-2]):
        if "/torch/" not in frame.filename:
            return f"{frame.filename}:{frame.lineno}"
    return "?"
