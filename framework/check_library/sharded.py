"""Tensors that FSDP shards over the ranks (DTensors), as the diagnostics read them.

Under ``torch_distributed = {"fsdp": {...}}`` every parameter, its gradient and the optimizer's
state of it are DTensors: each rank holds a slice. A diagnostic that judges values on its own
rank reads the slice (``local``: no communication, so no rank can wait for another that took a
different branch); one that needs the whole value reads ``full`` (an all-gather: every rank
must call it, in the same order). Outside FSDP both return the tensor itself. ``stored`` reads any
kind of tensor torch allows as a parameter or gradient (sparse, complex, sharded) as plain real values.

``torch.distributed.tensor`` takes about half a second to import; a run that never imported it
holds no DTensor, so the check below does not import it.
"""

from __future__ import annotations

import sys
from typing import Any

import torch


def is_sharded(value: Any) -> bool:
    """Whether ``value`` is a DTensor (a parameter, gradient or optimizer state that FSDP shards)."""
    module = sys.modules.get("torch.distributed.tensor")
    return module is not None and isinstance(value, module.DTensor)


def local(tensor: torch.Tensor) -> torch.Tensor:
    """This rank's slice of a DTensor (no communication); any other tensor as it is."""
    return tensor.to_local() if is_sharded(tensor) else tensor


def stored(tensor: torch.Tensor) -> torch.Tensor:
    """The values this rank stores of ``tensor`` as a real, strided tensor whose norm and sums are the tensor's:
    a DTensor's slice, a sparse tensor's explicit values (a sparse gradient of ``nn.Embedding(sparse=True)``:
    torch has no norm for the sparse layout, and densifying a large table would cost its full size), a complex
    tensor as its real and imaginary parts. Other tensors as they are."""
    tensor = local(tensor)
    if tensor.layout == torch.sparse_coo:
        tensor = tensor.coalesce().values()
    elif tensor.layout != torch.strided:  # CSR, CSC, BSR, BSC
        tensor = tensor.values()
    return torch.view_as_real(tensor) if tensor.is_complex() else tensor


def full(tensor: torch.Tensor) -> torch.Tensor:
    """The whole value of a DTensor, gathered from every rank (a collective); any other tensor as it is."""
    return tensor.full_tensor() if is_sharded(tensor) else tensor


def summed_over_shards(values: torch.Tensor, tensors: list[torch.Tensor]) -> torch.Tensor:
    """``values`` (one row per tensor of ``tensors``: sums over this rank's slice of it) summed over the ranks
    for the sharded tensors, one all-reduce; the rows of unsharded tensors stay this rank's. Outside FSDP,
    ``values`` itself. Every rank must call it with the same tensors (it is a collective under FSDP)."""
    sharded = [is_sharded(t) for t in tensors]
    if not any(sharded):
        return values
    import torch.distributed as dist

    mesh = next(t.device_mesh for t, s in zip(tensors, sharded, strict=True) if s)
    mask = torch.tensor(sharded, device=values.device).reshape(-1, *([1] * (values.dim() - 1)))
    # An unsharded row is the same on every rank: its share of the sum is 1/N of it.
    total = torch.where(mask, values, values / mesh.size())
    dist.all_reduce(total, group=mesh.get_group())
    return total


def norms(tensors: list[torch.Tensor]) -> torch.Tensor:
    """The 2-norm of each tensor in float32, stacked on the device; a sharded one's over all its slices (one
    all-reduce: a collective under FSDP, which every rank must call with the same tensors)."""
    local_norms = torch.stack(torch._foreach_norm([stored(t).float() for t in tensors]))
    if not any(is_sharded(t) for t in tensors):
        return local_norms
    return summed_over_shards(local_norms.double().square(), tensors).sqrt().float()


def on_any_rank(flag: bool, tensors: list[torch.Tensor]) -> bool:
    """Whether ``flag`` (a judgement of this rank's slices of ``tensors``) holds on any rank: one all-reduce if a
    tensor is sharded (a collective under FSDP, which every rank must call), else ``flag`` itself."""
    if not any(is_sharded(t) for t in tensors):
        return flag
    device = local(next(t for t in tensors if is_sharded(t))).device
    return bool(summed_over_ranks(torch.tensor([int(flag)], device=device), tensors).item())


def summed_over_ranks(value: torch.Tensor, tensors: list[torch.Tensor]) -> torch.Tensor:
    """``value`` (a judgement of this rank's slices of ``tensors``, on the device) summed over the ranks that
    shard them: one all-reduce, no host sync (a collective under FSDP, which every rank must call); ``value``
    itself when no tensor is sharded."""
    mesh = next((t.device_mesh for t in tensors if is_sharded(t)), None)
    if mesh is None:
        return value
    import torch.distributed as dist

    value = value.clone()
    dist.all_reduce(value, group=mesh.get_group())
    return value
