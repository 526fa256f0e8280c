"""Fully sharded data parallel training with FSDP2 (``torch_distributed = {"fsdp": {...}}``).

    torchrun --nproc_per_node=2 rnn.py config.py      # torch_distributed = {"fsdp": {}} in the config

``torch.distributed.fsdp.fully_shard`` splits every parameter, its gradient and the optimizer's
state of it over the ranks; a module's parameters are gathered for its forward and backward and
freed after. The ranks see the batches they see under DDP (every N-th), so the loss is DDP's.
Which modules are sharded as a unit (gathered at once): by default each block of every
``nn.ModuleList`` (a transformer's layers), then the root, which takes the rest; ``shard_modules``
names others by module path or class name (``fnmatch`` patterns). The other entries are
``fully_shard``'s: ``reshard_after_forward``, ``mp_policy`` (``MixedPrecisionPolicy``'s fields,
dtypes by name) and ``offload_policy`` (``"cpu"`` or ``CPUOffloadPolicy``'s fields).

Checkpoints hold the whole model and optimizer state, gathered from every rank and written by
rank 0 in the format of every other run: one process (eval, forward, ``tools/inspect-checkpoint.py``)
reads them, and a run with any number of ranks, sharded or not, resumes from them. Gathering is a
collective: every rank takes part, rank 0 keeps the result.
"""

from __future__ import annotations

import fnmatch
from typing import Any

import torch
import torch.distributed as dist

from framework.base import log
from framework.base.accelerator import is_accelerator
from framework.base.errors import ConfigError
from framework.check_library.sharded import full, is_sharded

# What a config may set, with the help a wrong value gets.
OPTIONS = {
    "shard_modules": "a list of module paths or class names (fnmatch patterns) to shard as units, e.g. "
    "['encoder.layers.*'] or ['TransformerEncoderLayer']; default: each block of every nn.ModuleList",
    "reshard_after_forward": "True (free gathered parameters after the forward; the default), False (keep them "
    "until the backward: more memory, less communication) or an int (reshard to that many ranks)",
    "mp_policy": "a dict of MixedPrecisionPolicy fields: param_dtype, reduce_dtype, output_dtype (dtype names "
    "such as 'bfloat16', or torch dtypes) and cast_forward_inputs (bool)",
    "offload_policy": "'cpu', or a dict of CPUOffloadPolicy fields ({'pin_memory': bool}): parameters, gradients "
    "and optimizer state live on the CPU between uses (needs an accelerator)",
}
_DTYPE_FIELDS = ("param_dtype", "reduce_dtype", "output_dtype")


def _fail(what: str) -> ConfigError:
    allowed = "; ".join(f"{name}: {doc}" for name, doc in OPTIONS.items())
    return ConfigError(f"torch_distributed['fsdp']: {what}. Allowed entries (fully_shard's options): {allowed}.")


def fully_shard_options(spec: Any, device: torch.device) -> dict[str, Any]:
    """``fully_shard``'s keyword arguments from the config's ``fsdp`` dict, plus ``shard_modules``; ConfigError
    naming the allowed entries for anything else."""
    if not isinstance(spec, dict):
        raise _fail(f"must be a dict (or {{}} for the defaults), got {spec!r}")
    unknown = sorted(set(spec) - set(OPTIONS), key=str)
    if unknown:
        raise _fail(f"unknown entries {unknown}")
    from torch.distributed.fsdp import CPUOffloadPolicy, MixedPrecisionPolicy

    options: dict[str, Any] = {}
    modules = spec.get("shard_modules")
    if modules is not None:
        if not isinstance(modules, (list, tuple)) or not all(isinstance(m, str) and m for m in modules):
            raise _fail(f"shard_modules must be a list of non-empty strings, got {modules!r}")
        options["shard_modules"] = list(modules)
    reshard = spec.get("reshard_after_forward", True)
    if not isinstance(reshard, (bool, int)) or (not isinstance(reshard, bool) and reshard < 1):
        raise _fail(f"reshard_after_forward must be True, False or an int >= 1, got {reshard!r}")
    options["reshard_after_forward"] = reshard
    if spec.get("mp_policy") is not None:
        options["mp_policy"] = MixedPrecisionPolicy(**_mp_fields(spec["mp_policy"]))
    offload = spec.get("offload_policy")
    if offload is not None:
        if device.type == "cpu":
            raise _fail(
                f"offload_policy = {offload!r} moves parameters to the CPU between uses, but this run trains on the "
                f"CPU already; leave it out"
            )
        fields = {} if offload == "cpu" else offload
        if not isinstance(fields, dict) or set(fields) - {"pin_memory"}:
            raise _fail(f"offload_policy must be 'cpu' or {{'pin_memory': bool}}, got {offload!r}")
        options["offload_policy"] = CPUOffloadPolicy(**fields)
    return options


def _mp_fields(policy: Any) -> dict[str, Any]:
    """MixedPrecisionPolicy's fields from a dict whose dtypes may be given by name."""
    allowed = (*_DTYPE_FIELDS, "cast_forward_inputs")
    if not isinstance(policy, dict) or set(policy) - set(allowed):
        raise _fail(f"mp_policy must be a dict with entries among {list(allowed)}, got {policy!r}")
    fields = dict(policy)
    for name in _DTYPE_FIELDS:
        value = fields.get(name)
        dtype = getattr(torch, value, None) if isinstance(value, str) else value
        if value is not None and not (isinstance(dtype, torch.dtype) and dtype.is_floating_point):
            raise _fail(f"mp_policy[{name!r}] must be a floating dtype such as 'bfloat16' or 'float32', got {value!r}")
        fields[name] = dtype
    if not isinstance(fields.get("cast_forward_inputs", True), bool):
        raise _fail(f"mp_policy['cast_forward_inputs'] must be a bool, got {fields['cast_forward_inputs']!r}")
    return fields


def shard(model: torch.nn.Module, options: dict[str, Any]) -> None:
    """Shard ``model`` in place over the ranks: its units (``shard_units``), then the root. Every rank starts
    from rank 0's parameters and buffers, as under DDP."""
    from torch.distributed.fsdp import fully_shard

    device = next(model.parameters()).device
    if is_accelerator(device) and device.index is not None:  # FSDP gathers on the current device: this rank's
        torch.accelerator.set_device_index(device.index)
    for tensor in [*model.parameters(), *model.buffers()]:
        dist.broadcast(tensor.data, src=0)
    kwargs = {k: v for k, v in options.items() if k != "shard_modules"}
    units = shard_units(model, options.get("shard_modules"))
    modules = dict(model.named_modules())
    for path in reversed(units):  # innermost first: a unit's parameters are taken by the unit, not its parent
        fully_shard(modules[path], **kwargs)
    fully_shard(model, **kwargs)
    shown = ", ".join(units[:4]) + (", ..." if len(units) > 4 else "")
    which = f"{len(units)} unit(s) ({shown}) and the root" if units else "the whole model as one unit"
    ranks = dist.get_world_size()
    log.v4(f"FSDP: {which}, sharded over {ranks} rank{'s' if ranks > 1 else ''}.")


def shard_units(model: torch.nn.Module, patterns: list[str] | None) -> list[str]:
    """Paths of the modules to shard as units, outermost first: those whose path or class name matches one of
    ``patterns``, or by default each block of every ``nn.ModuleList``. A pattern that matches nothing is a
    ConfigError (a misspelled pattern would shard everything as one unit)."""
    named = [(path, module) for path, module in model.named_modules() if path]
    if patterns is None:
        blocks = {id(child) for _, module in named if isinstance(module, torch.nn.ModuleList) for child in module}
        return [path for path, module in named if id(module) in blocks]

    def matches(pattern: str, path: str, module: torch.nn.Module) -> bool:
        return fnmatch.fnmatchcase(path, pattern) or fnmatch.fnmatchcase(type(module).__name__, pattern)

    matched = [path for path, module in named if any(matches(pattern, path, module) for pattern in patterns)]
    unused = [pattern for pattern in patterns if not any(matches(pattern, path, module) for path, module in named)]
    if unused:
        examples = ", ".join(p for p, _ in named[:6])
        raise ConfigError(
            f"torch_distributed['fsdp']['shard_modules']: {unused} match no module path or class name of the model "
            f"from get_model (its module paths start: {examples}). Give paths as named_modules() names them "
            f"('layers.*') or class names ('TransformerEncoderLayer')."
        )
    return matched


def full_state_dicts(model: torch.nn.Module, optimizer: torch.optim.Optimizer) -> tuple[dict, dict]:
    """The model's and the optimizer's state dicts with every sharded tensor gathered whole, on the CPU (the
    format of an unsharded run's). A collective under FSDP: every rank calls it; outside FSDP, the state dicts."""
    model_state = {name: _gathered(value) for name, value in model.state_dict().items()}
    optimizer_state = optimizer.state_dict()
    if "state" not in optimizer_state:  # several optimizers (never sharded: FSDP takes one)
        return model_state, optimizer_state
    optimizer_state["state"] = {
        index: {key: _gathered(value) for key, value in entries.items()}
        for index, entries in optimizer_state["state"].items()
    }
    return model_state, optimizer_state


def _gathered(value: Any) -> Any:
    return full(value).cpu() if is_sharded(value) else value


def sharded_like(reference: dict[str, Any], saved: dict[str, Any]) -> dict[str, Any]:
    """``saved`` (whole tensors) with every entry whose ``reference`` is sharded cut the same way: this rank's
    slice as a DTensor. No communication: every rank reads the same checkpoint."""
    result = dict(saved)
    for name, own in reference.items():
        value = saved.get(name)
        if is_sharded(own) and isinstance(value, torch.Tensor) and not is_sharded(value):
            from torch.distributed.tensor import distribute_tensor

            local = value.to(device=own.to_local().device, dtype=own.dtype)
            result[name] = distribute_tensor(local, own.device_mesh, own.placements, src_data_rank=None)
    return result


def sharded_optimizer_state(optimizer: torch.optim.Optimizer, saved: dict[str, Any]) -> dict[str, Any]:
    """An optimizer state dict of whole tensors (``full_state_dicts``) with the state of each sharded parameter
    cut like the parameter, ready for ``optimizer.load_state_dict``."""
    if not any(is_sharded(p) for group in optimizer.param_groups for p in group["params"]):
        return saved
    from torch.distributed.tensor import distribute_tensor

    saved_ids = [index for group in saved.get("param_groups", []) for index in group["params"]]
    params = [p for group in optimizer.param_groups for p in group["params"]]
    by_index = dict(zip(saved_ids, params, strict=False))  # a mismatch is load_state_dict's to report
    state = {}
    for index, entries in saved.get("state", {}).items():
        param = by_index.get(index)
        state[index] = {
            key: distribute_tensor(
                value.to(param.to_local().device), param.device_mesh, param.placements, src_data_rank=None
            )
            if is_sharded(param) and isinstance(value, torch.Tensor) and value.shape == param.shape
            else value
            for key, value in entries.items()
        }
    return {**saved, "state": state}


def refuse_ddp_options(options: dict[str, Any]) -> None:
    """ConfigError for the ``torch_distributed`` entries of data-parallel replicas, which FSDP has none of."""
    if options.get("param_sync_step") is not None:
        raise ConfigError(
            "torch_distributed: 'param_sync_step' averages full replicas of the parameters every K updates, but "
            "with 'fsdp' each rank holds only a shard of them and the gradients are reduced at every step. Use one "
            "of the two: remove 'param_sync_step', or 'fsdp'."
        )
    if options.get("find_unused_parameters"):
        raise ConfigError(
            "torch_distributed: 'find_unused_parameters' is an option of DDP; FSDP needs none (a parameter without "
            "a gradient is left out of the reduction, and the sanity check names it). Remove it when using 'fsdp'."
        )
