"""Optimizers by name, RETURNN's weight-decay groups, an update that a device-side flag can skip, gradient noise and
clipping."""

from __future__ import annotations

import fnmatch
from collections.abc import Callable
from typing import Any

import torch

from framework.base import log
from framework.base.config import Config
from framework.base.errors import ConfigError
from framework.base.options import register
from framework.base.util import check_kwargs, import_by_name

register(
    "optimizer",
    "dict | str",
    {"class": "adam"},
    "{'class': any torch.optim name (adam, adamw, nadam, sgd, ...) | 'module.Class' | callable, **kwargs}; kwargs "
    "go to the optimizer ('epsilon' means eps). With weight_decay, biases and the parameters of "
    "weight_decay_modules_blacklist (default: LayerNorm, Embedding) do not decay, as in RETURNN. 'param_groups': "
    "[{'params': 'glob of parameter names' | [globs] | callable(name, param), 'lr_multiplier': m, 'weight_decay': "
    "wd}, ...] gives the parameters each selects (the first group that selects a parameter has it) their own rate "
    "(m times every scheduled rate) and weight decay.",
    __name__,
)
register("learning_rate", "float", 1e-3, "Initial learning rate.", __name__, range="[0, inf)")
register(
    "learning_rates",
    "list[float] | None",
    None,
    "Fixed learning rates for the first epochs (e.g. warmup); control takes over after.",
    __name__,
    range="[0, inf)",
)
register(
    "learning_rate_control",
    "str",
    "constant",
    "How the learning rate changes per epoch.",
    __name__,
    choices=("constant", "newbob", "newbob_rel", "newbob_relative", "newbob_multi_epoch"),
)
register(
    "newbob_multi_num_epochs",
    "int",
    5,
    "newbob_multi_epoch: the mean relative change over this many epochs decides (RETURNN's option).",
    __name__,
    range="[1, inf)",
)
register(
    "newbob_multi_update_interval",
    "int | None",
    None,
    "newbob_multi_epoch: decide every this many epochs (None: newbob_multi_num_epochs).",
    __name__,
    range="[1, inf)",
)
register(
    "learning_rate_control_relative_error_relative_lr",
    "bool",
    False,
    "Newbob: divide the relative change by learning rate / initial learning rate (RETURNN's option).",
    __name__,
)
register(
    "learning_rate_control_min_num_epochs_per_new_lr",
    "int",
    0,
    "Newbob: keep a new learning rate at least this many epochs (RETURNN's option).",
    __name__,
    range="[0, inf)",
)
register(
    "newbob_relative_error_div_by_old",
    "bool",
    False,
    "Newbob: the relative change is (new - old) / |old| instead of RETURNN's default (new - old) / |new|.",
    __name__,
)
register(
    "learning_rate_control_error_measure",
    "str | None",
    None,
    "Score that newbob watches, as '<dataset>_<loss>' (e.g. dev_ce); None: first loss on the first dev set.",
    __name__,
)
register(
    "newbob_learning_rate_decay",
    "float | callable",
    0.5,
    "Newbob: multiply the learning rate by this when the score stops improving (a function lr -> lr: apply it, "
    "as in RETURNN).",
    __name__,
    range="(0, 1]",
)
register(
    "learning_rate_decay",
    "float | callable | None",
    None,
    "RETURNN's name for newbob_learning_rate_decay; wins over it when both are set.",
    __name__,
    range="(0, 1]",
)
register(
    "newbob_learning_rate_growth",
    "float | callable",
    1.0,
    "Newbob: multiply the learning rate by this when the score improves (newbob: the change is at or below "
    "newbob_relative_error_threshold; newbob_multi_epoch: below newbob_relative_error_grow_threshold), not bounded "
    "(a function lr -> lr: apply it); 1.0: off. RETURNN's option.",
    __name__,
    range="(0, inf)",
)
register(
    "learning_rate_growth",
    "float | callable | None",
    None,
    "RETURNN's name for newbob_learning_rate_growth; wins over it when both are set.",
    __name__,
    range="(0, inf)",
)
register(
    "newbob_relative_error_grow_threshold",
    "float | None",
    None,
    "newbob_multi_epoch: grow the learning rate when the mean relative change is below this (None: "
    "newbob_relative_error_threshold, as in RETURNN; above it is an error, as RETURNN fails between the two).",
    __name__,
)
register(
    "newbob_relative_error_threshold",
    "float",
    -0.01,
    "Newbob: decay when the relative change (new - old) / |new| of the watched score is above this.",
    __name__,
)
register(
    "min_learning_rate",
    "float",
    0.0,
    "Lower bound for the learning rate under learning-rate control.",
    __name__,
    range="[0, inf)",
)
register(
    "dynamic_learning_rate",
    "callable | None",
    None,
    "dynamic_learning_rate(*, global_train_step, epoch, epoch_continuous, learning_rate, **kwargs) -> lr, applied "
    "every step (the arguments RETURNN passes; a function without **kwargs gets those it names).",
    __name__,
)
# Every torch.optim optimizer by its lower-case name (adam, adamw, nadam, sgd, ...), as RETURNN names them.
OPTIMIZERS = {
    name.lower(): cls
    for name, cls in vars(torch.optim).items()
    if isinstance(cls, type) and issubclass(cls, torch.optim.Optimizer) and cls is not torch.optim.Optimizer
}

# RETURNN spells some options differently from torch.
_RETURNN_KWARG_NAMES = {"epsilon": "eps"}


def create_optimizer(config: Config, model: torch.nn.Module) -> torch.optim.Optimizer:
    """The optimizer that the ``optimizer`` option describes, at ``learning_rate``."""
    return build_optimizer(config.get("optimizer"), model, config.float("learning_rate"), "optimizer")


def build_optimizer(
    spec: dict[str, Any] | str,
    model: torch.nn.Module,
    lr: float,
    option: str,
    only: set[int] | None = None,
) -> torch.optim.Optimizer:
    """The optimizer ``spec`` describes (the ``optimizer`` option's form), at rate ``lr``, over the trainable
    parameters of ``model`` (``only``: the ids of those it holds). ``option`` names the spec in errors."""
    kwargs: dict[str, Any] = {"class": spec} if isinstance(spec, str) else dict(spec)
    name = kwargs.pop("class", None)
    if name is None:
        raise ConfigError(f"{option} = {spec!r} has no 'class'; e.g. {{'class': 'adam', 'weight_decay': 0.01}}.")
    if callable(name):
        factory = name
    elif isinstance(name, str) and name.lower() in OPTIMIZERS:
        factory = OPTIMIZERS[name.lower()]
    elif isinstance(name, str) and "." in name:
        factory = import_by_name(name, option)
    else:
        raise ConfigError(
            f"{option}: unknown class {name!r}; use one of {', '.join(OPTIMIZERS)}, 'module.Class' or a callable."
        )
    kwargs = {_RETURNN_KWARG_NAMES.get(k, k): v for k, v in kwargs.items()}
    if "lr" in kwargs:
        raise ConfigError(f"{option}: set the learning rate with the 'learning_rate' option, not {option}['lr'].")
    blacklist = kwargs.pop("weight_decay_modules_blacklist", None)
    include_check = kwargs.pop("weight_decay_custom_include_check", None)
    specs = kwargs.pop("param_groups", None)
    check_kwargs(factory, kwargs, option)
    held = [p for p in trainable_parameters(model) if only is None or id(p) in only]
    params: Any = held
    if specs is not None:
        params = parameter_groups(model, specs, kwargs.get("weight_decay"), blacklist, include_check, lr, only, option)
    elif kwargs.get("weight_decay"):
        params = weight_decay_groups(model, kwargs["weight_decay"], blacklist, include_check, only)
    elif blacklist is not None or include_check is not None:
        log.v4(f"{option}: weight_decay_modules_blacklist / weight_decay_custom_include_check unused: no weight_decay.")
    # torch checks the parameters' dtypes for a fused kernel only at the first step: complex ones have none.
    fusable = all(p.is_floating_point() for p in held)
    if fusable and factory in OPTIMIZERS.values() and not {"fused", "foreach", "differentiable"} & set(kwargs):
        try:  # torch's fused kernels: faster, and they skip an update on a device flag without a host sync
            return factory(params, lr=lr, fused=True, **kwargs)
        except (RuntimeError, ValueError, TypeError):  # no fused kernel for this class, device or dtype
            pass
    return _group_rates_kept(factory(params, lr=lr, **kwargs), lr, option)


def _group_rates_kept(optimizer: Any, lr: float, option: str) -> Any:
    """``optimizer`` with the rate a callable class gave a param group of its own (another than ``lr``) kept as the
    group's ``lr_multiplier``: the schedules set every group's rate to theirs times that factor, which would otherwise
    overwrite it with the base rate at the first step."""
    for index, group in enumerate(getattr(optimizer, "param_groups", [])):
        own = group.get("lr")
        if "lr_multiplier" in group or not isinstance(own, float | int) or lr <= 0 or own == lr:
            continue
        group["lr_multiplier"] = float(own) / lr
        log.v4(f"{option}: param group {index} has its own rate {own:g}, kept as {own / lr:g}x the learning rate.")
    return optimizer


def weight_decay_groups(
    model: torch.nn.Module,
    weight_decay: float,
    blacklist: list[Any] | None,
    include_check: Callable[..., bool | None] | None,
    only: set[int] | None = None,
) -> list[dict[str, Any]]:
    """RETURNN's two parameter groups: with ``weight_decay``, and without it for biases and the parameters of the
    modules in ``blacklist`` (RETURNN's ``weight_decay_modules_blacklist``; default LayerNorm and Embedding).
    ``include_check(module=, rf_module=, full_param_name=, param=)`` may decide per parameter (None: the rule).
    ``only``: the ids of the parameters to group (default: every trainable one)."""
    blacklisted = _module_types(blacklist)
    decay, no_decay, seen = [], [], set()
    for module in model.modules():
        for name, param in module.named_parameters(recurse=False):
            if id(param) in seen or not param.requires_grad or (only is not None and id(param) not in only):
                continue
            seen.add(id(param))
            include = None
            if include_check is not None:
                include = include_check(module=module, rf_module=None, full_param_name=name, param=param)
            if include is None:
                include = not (name.endswith("bias") or isinstance(module, blacklisted))
            (decay if include else no_decay).append(param)
    log.v4(
        f"optimizer: weight_decay {weight_decay:g} on {len(decay)} parameter tensors; not on {len(no_decay)} (biases "
        f"and {', '.join(t.__name__ for t in blacklisted) or 'no module types'}, RETURNN's rule)."
    )
    return [{"params": decay, "weight_decay": weight_decay}, {"params": no_decay, "weight_decay": 0.0}]


def parameter_groups(
    model: torch.nn.Module,
    specs: Any,
    weight_decay: float | None,
    blacklist: list[Any] | None,
    include_check: Callable[..., bool | None] | None,
    lr: float,
    only: set[int] | None = None,
    option: str = "optimizer",
) -> list[dict[str, Any]]:
    """The torch parameter groups of ``optimizer['param_groups']``: each spec selects parameters by name (globs, or
    a callable ``(name, param) -> bool``; the first spec that selects a parameter has it) and gives them
    ``lr_multiplier`` (every rate the schedules set is multiplied by it) and ``weight_decay`` (else the optimizer's,
    by RETURNN's rule); the parameters no spec selects form a group at multiplier 1. ``only``: the ids of the
    parameters to group (default: every trainable one)."""
    if not isinstance(specs, (list, tuple)) or not all(isinstance(spec, dict) for spec in specs):
        raise ConfigError(f"{option}['param_groups'] must be a list of dicts, got {specs!r}.")
    named = [(n, p) for n, p in model.named_parameters() if p.requires_grad and (only is None or id(p) in only)]
    taken: set[int] = set()
    selected: list[tuple[dict[str, Any], list[torch.nn.Parameter]]] = []
    for index, spec in enumerate(specs):
        unknown = set(spec) - {"params", "lr_multiplier", "weight_decay"}
        if "params" not in spec or unknown:
            raise ConfigError(
                f"{option}['param_groups'][{index}] = {spec!r}: give 'params' (a glob of parameter names, a list of "
                f"globs or a callable(name, param)) and optionally 'lr_multiplier' and 'weight_decay'"
                + (f"; unknown keys: {', '.join(sorted(unknown))}" if unknown else "")
                + "."
            )
        chosen = [p for n, p in named if id(p) not in taken and selects(spec["params"], n, p)]
        if not chosen:
            raise ConfigError(
                f"{option}['param_groups'][{index}] selects no trainable parameter not already in an earlier group "
                f"({spec['params']!r}); the model's parameters are named like {', '.join(n for n, _ in named[:4])}."
            )
        taken.update(id(p) for p in chosen)
        selected.append((spec, chosen))
    rest = [p for _, p in named if id(p) not in taken]
    if rest:
        selected.append(({"lr_multiplier": 1.0}, rest))
    groups = []
    for spec, chosen in selected:
        multiplier = float(spec.get("lr_multiplier", 1.0))
        decay = spec.get("weight_decay", weight_decay)
        if decay and "weight_decay" not in spec:
            parts = weight_decay_groups(model, decay, blacklist, include_check, only={id(p) for p in chosen})
        else:
            parts = [{"params": chosen, **({"weight_decay": float(decay)} if decay is not None else {})}]
        for part in parts:
            if part["params"]:
                groups.append({**part, "lr": lr * multiplier, "lr_multiplier": multiplier})
        log.v4(
            f"{option}: {len(chosen)} parameter tensors ({spec.get('params', 'the rest')!r}) at {multiplier:g}x the "
            f"learning rate" + (f", weight_decay {decay:g}" if decay else "")
        )
    return groups


def selects(pattern: Any, name: str, param: torch.nn.Parameter) -> bool:
    """Whether ``pattern`` (a glob of parameter names, a list of globs or a callable(name, param)) selects a
    parameter."""
    if callable(pattern):
        return bool(pattern(name, param))
    patterns = [pattern] if isinstance(pattern, str) else list(pattern)
    return any(fnmatch.fnmatchcase(name, p) for p in patterns)


def set_learning_rate(optimizer: torch.optim.Optimizer, lr: float) -> None:
    """Give every parameter group ``lr`` times its ``lr_multiplier`` (1 when it has none): the one place schedules
    set the rate, so that the ratios between groups hold."""
    for group in optimizer.param_groups:
        group["lr"] = lr * group.get("lr_multiplier", 1.0)


def base_learning_rate(optimizer: torch.optim.Optimizer) -> float:
    """The rate before the groups' multipliers (the first group's rate over its multiplier)."""
    group = optimizer.param_groups[0]
    return float(group["lr"]) / group.get("lr_multiplier", 1.0)


def _module_types(blacklist: list[Any] | None) -> tuple[type, ...]:
    """``weight_decay_modules_blacklist`` as module types: types, or names ``torch.nn.X`` / ``rf.X`` (RETURNN's
    frontend modules exist here only as what ported model code uses instead: ``rf.LayerNorm`` means torch's)."""
    if blacklist is None:
        return torch.nn.LayerNorm, torch.nn.Embedding
    if not isinstance(blacklist, (list, tuple)):
        raise ConfigError(f"optimizer['weight_decay_modules_blacklist'] must be a list, got {blacklist!r}.")
    types = []
    for entry in blacklist:
        if isinstance(entry, str):
            module_name, _, class_name = entry.rpartition(".")
            if module_name == "rf":
                entry = getattr(torch.nn, class_name, None)
                if entry is None:  # an rf module without torch counterpart (e.g. LearnedRelativePositionalEncoding)
                    continue
            elif module_name.startswith("torch"):
                entry = import_by_name(entry, "optimizer['weight_decay_modules_blacklist']")
            else:
                raise ConfigError(
                    f"optimizer['weight_decay_modules_blacklist']: {entry!r} is no 'torch.nn.X' or 'rf.X' name; give "
                    "module types or such names."
                )
        if not (isinstance(entry, type) and issubclass(entry, torch.nn.Module)):
            raise ConfigError(f"optimizer['weight_decay_modules_blacklist']: {entry!r} is not a torch.nn.Module type.")
        types.append(entry)
    return tuple(types)


def trainable_parameters(model: torch.nn.Module) -> list[torch.nn.Parameter]:
    """The parameters of ``model`` that require gradients; ConfigError when there are none."""
    params = [p for p in model.parameters() if p.requires_grad]
    if not params:
        raise ConfigError(
            "The model from get_model has no parameters that require gradients; nothing to train. (Modules kept in "
            "a plain list or dict are not registered: use nn.ModuleList / nn.ModuleDict.)"
        )
    return params


def step_unless(
    optimizer: torch.optim.Optimizer, skip: torch.Tensor | None, by_optimizer: dict[str, torch.Tensor] | None = None
) -> None:
    """``optimizer.step()``, skipped where the device flag ``skip`` is true; several optimizers
    (``optimizer_set.OptimizerSet``): each one also where its flag in ``by_optimizer`` is.

    Fused optimizers take the flag the way ``torch.amp.GradScaler`` hands it to them (``found_inf``):
    the kernel skips the update on the device, no host sync. Any other optimizer reads the flag first.
    """
    if hasattr(optimizer, "step_unless"):  # several optimizers: each one's own way, with its own flag
        optimizer.step_unless(skip, by_optimizer or {})
    elif skip is None:
        optimizer.step()
    elif getattr(optimizer, "_step_supports_amp_scaling", False):
        converted = skip.dtype != torch.float32 or skip.dim() != 0  # a 1.0/0.0 float32 flag goes as it is
        optimizer.found_inf = skip.to(torch.float32).reshape(()) if converted else skip
        try:
            optimizer.step()
        finally:
            del optimizer.found_inf
    elif not bool(skip):  # one host sync: the flag decides on the host
        optimizer.step()
