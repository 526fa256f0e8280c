"""A test-only accelerator: torch's PrivateUse1 backend, written in Python, whose memory is CPU memory.

``install()`` registers the device ``emu`` (``torch.device("emu")``, ``tensor.to("emu")``,
``torch.accelerator.current_accelerator()`` names it). Every aten op on an ``emu`` tensor reaches
one boxed fallback, which runs the op's CPU kernel on CPU views of the same memory and hands the
results back as ``emu`` tensors. What makes it a device rather than a second CPU:

- tensors of the two devices do not mix: an op that gets a CPU tensor with more than zero
  dimensions next to an ``emu`` one fails as on a GPU ("Expected all tensors to be on the same device");
- the host waits for it as for a GPU, and ``SYNCS`` records each wait with its call site: a value
  read (``item``), a blocking device->host copy, an op whose output size depends on the data
  (``nonzero``, boolean-mask indexing, ``unique``, ``masked_select``, ...);
- it lacks what a Python backend cannot have: pinned memory, events and streams, memory statistics.
  The framework's fallbacks for these run here; the fast paths need a real GPU.

Storages are real (``torch.save``, ``deepcopy`` and ``untyped_storage().data_ptr()`` work): an ``emu``
storage points into a CPU storage, which its Python object keeps alive.
"""

from __future__ import annotations

import collections
import traceback

import torch
from torch.library import Library
from torch.utils._pytree import tree_map
from torch.utils.backend_registration import _setup_privateuseone_for_python_backend

NAME = "emu"
SYNCS: collections.Counter[str] = collections.Counter()  # "what at file:line" -> how often the host waited
COPIES: collections.Counter[str] = collections.Counter()  # "host->device" / "device->host" (blocking or not)

_aten = torch.ops.aten
_CPU_KERNEL = torch._C.DispatchKeySet(torch._C.DispatchKey.CPU)
# Output sizes that depend on the values: a GPU must finish computing them before the host can go on.
_DATA_DEPENDENT = {
    _aten.nonzero.default,
    _aten.masked_select.default,
    _aten._unique.default,
    _aten._unique2.default,
    _aten.unique_dim.default,
    _aten.unique_consecutive.default,
    _aten.bincount.default,
    _aten.repeat_interleave.Tensor,
}
_BOOLEAN_INDEXING = {_aten.index.Tensor, _aten.index_put.default, _aten.index_put_.default}
# Ops that take tensors of other devices on purpose (CPU index tensors, as CUDA allows).
_MAY_MIX = _BOOLEAN_INDEXING | {_aten._index_put_impl_.default}
_lib: Library | None = None
DEVICE: torch.device | None = None  # torch.device("emu", 0) once installed


class _Module:
    """``torch.emu``: what torch asks of a device module."""

    @staticmethod
    def is_available() -> bool:
        return True

    @staticmethod
    def is_initialized() -> bool:
        return True

    @staticmethod
    def device_count() -> int:
        return 1

    @staticmethod
    def current_device() -> int:
        return 0

    @staticmethod
    def _is_in_bad_fork() -> bool:
        return False

    @staticmethod
    def manual_seed_all(seed: int) -> None:
        pass  # random numbers of emu tensors come from the CPU generator

    @staticmethod
    def synchronize(device: object = None) -> None:
        pass

    @staticmethod
    def get_amp_supported_dtype() -> list[torch.dtype]:
        return [torch.float16, torch.bfloat16]


def install() -> torch.device:
    """Register the ``emu`` device once per process; returns it."""
    global _lib, DEVICE
    if _lib is None:
        _setup_privateuseone_for_python_backend(NAME, backend_module=_Module())
        _lib = Library("_", "IMPL")
        _lib.fallback(_run_on_cpu, "PrivateUse1")
        _lib.fallback(torch.library.fallthrough_kernel, "AutocastPrivateUse1")
        _register_autocast()
        DEVICE = torch.device(NAME, 0)
    return DEVICE


# torch.autocast on the device, as on CUDA: matrix products in the autocast dtype, losses and softmax in float32.
_LOWER_PRECISION = ("linear", "matmul", "mm", "addmm", "bmm", "baddbmm", "conv1d", "conv2d")
_FLOAT32 = ("log_softmax.int", "softmax.int", "nll_loss", "mse_loss", "layer_norm", "cross_entropy_loss")
_autocast_lib: Library | None = None


def _register_autocast() -> None:
    global _autocast_lib
    _autocast_lib = Library("aten", "IMPL")
    for names, dtype in ((_LOWER_PRECISION, None), (_FLOAT32, torch.float32)):
        for name in names:  # "op.overload" registers that overload; the kernel calls the op by its name
            packet = getattr(_aten, name.split(".")[0])
            _autocast_lib.impl(name, _autocast_kernel(packet, dtype), "AutocastPrivateUse1")


def _autocast_kernel(packet: object, dtype: torch.dtype | None) -> object:
    def kernel(*args: object, **kwargs: object) -> object:
        to = dtype or torch.get_autocast_dtype(NAME)

        def cast(x: object) -> object:
            return x.to(to) if _on_emu(x) and x.is_floating_point() else x

        with torch._C._ExcludeDispatchKeyGuard(torch._C.DispatchKeySet(torch._C.DispatchKey.AutocastPrivateUse1)):
            return packet(*tree_map(cast, args), **kwargs)

    return kernel


def _call_site() -> str:
    for frame in reversed(traceback.extract_stack()[:-2]):  # not torch's, ours, nor a dispatch mode's
        if "/torch/" not in frame.filename and frame.filename != __file__ and frame.name != "__torch_dispatch__":
            return f"{frame.filename}:{frame.lineno}"
    return "?"


def _wait(what: str) -> None:
    SYNCS[f"{what} at {_call_site()}"] += 1


def _on_emu(x: object) -> bool:
    return isinstance(x, torch.Tensor) and x.device.type == NAME


def _cpu_view(t: torch.Tensor) -> torch.Tensor:
    """A CPU tensor over the memory of ``t`` (an emu tensor), with its sizes and strides."""
    storage = t.untyped_storage()
    cpu = torch._C._construct_storage_from_data_pointer(storage.data_ptr(), torch.device("cpu"), storage.nbytes())
    return torch.empty(0, dtype=t.dtype).set_(cpu, t.storage_offset(), t.size(), t.stride())


def _emu_tensor(cpu: torch.Tensor, owner: torch.UntypedStorage) -> torch.Tensor:
    """An emu tensor over the memory of ``cpu``; ``owner`` (the CPU storage it lies in) lives as long as it."""
    storage = torch._C._construct_storage_from_data_pointer(
        cpu.untyped_storage().data_ptr(), DEVICE, cpu.untyped_storage().nbytes()
    )
    storage._owner = owner  # kept by the storage's Python object, which torch keeps alive with the storage
    out = torch._C._acc.create_empty_tensor([0], cpu.dtype)
    _aten.set_.source_Storage_storage_offset.redispatch(
        _CPU_KERNEL, out, storage, cpu.storage_offset(), cpu.size(), cpu.stride()
    )
    return out


def _owner_of(t: torch.Tensor) -> torch.UntypedStorage:
    return getattr(t.untyped_storage(), "_owner", None) or t.untyped_storage()


def _check_devices(op: object, args: tuple, kwargs: dict) -> None:
    tensors = [x for x in torch.utils._pytree.tree_leaves((args, kwargs)) if isinstance(x, torch.Tensor)]
    if op in _MAY_MIX:
        return
    if any(t.device.type == "cpu" and t.dim() > 0 for t in tensors) and any(map(_on_emu, tensors)):
        others = sorted({str(t.device) for t in tensors if not _on_emu(t)})
        raise RuntimeError(
            f"Expected all tensors to be on the same device, but found at least two devices, {DEVICE} and "
            f"{others[0]}! (when checking argument for {op})"
        )


def _copy_from(src: torch.Tensor, dst: torch.Tensor, non_blocking: bool = False) -> torch.Tensor:
    direction = "device->host" if _on_emu(src) and not _on_emu(dst) else "host->device"
    if _on_emu(src) != _on_emu(dst):
        COPIES[f"{direction} {'non-blocking' if non_blocking else 'blocking'}"] += 1
        if direction == "device->host" and not non_blocking:
            _wait("device->host copy")
    (_cpu_view(dst) if _on_emu(dst) else dst).copy_(_cpu_view(src) if _on_emu(src) else src)
    return dst


def _resize(t: torch.Tensor, size: list[int], memory_format: object = None) -> torch.Tensor:
    offset = t.storage_offset()
    if (
        torch.empty(size, device="meta").numel() * t.element_size()
        > t.untyped_storage().nbytes() - offset * t.element_size()
    ):
        fresh = torch.empty(size, dtype=t.dtype)  # a CPU view cannot grow: new memory, as a GPU allocates it
        _aten.set_.source_Storage.redispatch(
            _CPU_KERNEL, t, _emu_tensor(fresh, fresh.untyped_storage()).untyped_storage()
        )
        offset = 0
    strides = torch.empty(size, device="meta").stride()
    _aten.set_.source_Storage_storage_offset.redispatch(_CPU_KERNEL, t, t.untyped_storage(), offset, size, strides)
    return t


def _run_on_cpu(op: torch._ops.OpOverload, *args: object, **kwargs: object) -> object:
    """The fallback of every aten op on an emu tensor."""
    if op is _aten._copy_from.default:
        return _copy_from(*args, **kwargs)
    if op is _aten.resize_.default:
        return _resize(*args, **kwargs)
    if op.overloadpacket is _aten.set_:  # sizes and storage only: the CPU kernel does it for any device
        return op.redispatch(_CPU_KERNEL, *args, **kwargs)
    _check_devices(op, args, kwargs)
    if op is _aten._local_scalar_dense.default:
        _wait("a value read (item, float, bool, tolist)")
    elif op in _DATA_DEPENDENT or (
        op in _BOOLEAN_INDEXING
        and any(i is not None and i.dtype in (torch.bool, torch.uint8) and _on_emu(i) for i in args[1])
    ):
        _wait(f"{op.overloadpacket.__name__}, whose output size depends on the data,")
    views: dict[int, torch.Tensor] = {}  # id(cpu view) -> the emu tensor it shows

    def to_cpu(x: object) -> object:
        if _on_emu(x):
            view = _cpu_view(x)
            views[id(view)] = x
            return view
        return torch.device("cpu") if isinstance(x, torch.device) and x.type == NAME else x

    cpu_args, cpu_kwargs = tree_map(to_cpu, args), tree_map(to_cpu, kwargs)
    # out= tensors get the result's size: written on fresh CPU tensors, then resized and copied (their CPU views
    # cannot grow)
    results = {}
    for name in [a.name for a in op._schema.arguments if a.is_out and _on_emu(kwargs.get(a.name))]:
        results[name] = cpu_kwargs[name] = torch.empty(0, dtype=kwargs[name].dtype)
        views[id(results[name])] = kwargs[name]
    out = op(*cpu_args, **cpu_kwargs)
    for name, result in results.items():
        _cpu_view(_resize(kwargs[name], result.shape)).copy_(result)
    owners = {
        v.untyped_storage().data_ptr(): _owner_of(views[i]) for i, v in _by_id(cpu_args, cpu_kwargs) if i in views
    }

    def to_emu(x: object) -> object:
        if not isinstance(x, torch.Tensor):
            return x
        if id(x) in views:  # in place or out=: the emu tensor itself
            return views[id(x)]
        return _emu_tensor(x, owners.get(x.untyped_storage().data_ptr(), x.untyped_storage()))

    return tree_map(to_emu, out)


def _by_id(args: tuple, kwargs: dict) -> list[tuple[int, torch.Tensor]]:
    leaves = torch.utils._pytree.tree_leaves((args, kwargs))
    return [(id(x), x) for x in leaves if isinstance(x, torch.Tensor)]
