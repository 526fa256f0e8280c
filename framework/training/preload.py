"""RETURNN's ``preload_from_files``: parameters from other checkpoints loaded into the model.

``preload_from_files = {name: {"filename": path, ...}}``; per entry, as in RETURNN's torch engine:
``init_for_train`` (True: when a training starts fresh; False, the default: for eval and forward, after
the model's own checkpoint), ``prefix`` (the entry's parameters are the model's parameters under this
prefix, stored without it), ``checkpoint_key`` (the entry of the file that holds the parameters,
default ``"model"``; None: the file is the state dict), ``var_name_mapping`` ({model name: name in the
file}), ``ignore_params`` / ``ignore_params_prefixes``, ``ignore_missing`` (model parameters the file
lacks stay as they are). Entries are applied in RETURNN's order (reverse sorted by name, so the first
name wins). A parameter of the wrong shape, or an entry that fits nothing, stops the run.
"""

from __future__ import annotations

from typing import Any

import torch

from framework.base import log
from framework.base.config import Config
from framework.base.errors import CheckpointError, ConfigError
from framework.training.checkpoint import load_verified

_KEYS = {
    "filename",
    "init_for_train",
    "prefix",
    "checkpoint_key",
    "var_name_mapping",
    "ignore_missing",
    "ignore_params",
    "ignore_params_prefixes",
}


def preload_from_files(config: Config, model: torch.nn.Module, *, training: bool) -> None:
    """Load the entries of ``preload_from_files`` that apply: ``init_for_train`` ones when a training starts
    fresh (``training``), the others for eval and forward."""
    for name, opts in reversed(sorted((config.get("preload_from_files") or {}).items())):
        where = f"preload_from_files[{name!r}]"
        if not isinstance(opts, dict) or "filename" not in opts:
            raise ConfigError(f"{where} must be a dict with 'filename' (and RETURNN's other entries), got {opts!r}.")
        unknown = sorted(set(opts) - _KEYS)
        if unknown:
            raise ConfigError(f"{where}: {unknown} not supported here; known: {', '.join(sorted(_KEYS))}.")
        init_for_train = opts.get("init_for_train", False)
        if init_for_train not in (True, False):
            raise ConfigError(
                f"{where}: init_for_train {init_for_train!r} is not supported here (True: at the start of a "
                f"training, False: for eval/forward). RETURNN's 'always' keeps those parameters out of its own "
                f"checkpoints; here, freeze them in get_model and load them with init_for_train = True."
            )
        if init_for_train != training:
            continue
        if opts["filename"] is None:  # RETURNN: these parameters keep their random initialization
            continue
        _load_entry(model, opts, where)


def _load_entry(model: torch.nn.Module, opts: dict[str, Any], where: str) -> None:
    path = str(opts["filename"])
    try:
        state = load_verified(path)  # every record's CRC-32 checked, as for the run's own checkpoints
    except CheckpointError as exc:
        raise CheckpointError(f"{where}: {exc}") from None
    key = opts.get("checkpoint_key", "model")
    if key is not None:
        if not isinstance(state, dict) or key not in state:
            raise CheckpointError(f"{where}: {path} has no entry {key!r}; set checkpoint_key (None: the state dict).")
        state = state[key]
    prefix = opts.get("prefix") or ""
    state = {prefix + k: v for k, v in state.items()}
    ignore, ignore_prefixes = opts.get("ignore_params", []), tuple(opts.get("ignore_params_prefixes", []))
    state = {
        k: v for k, v in state.items() if k not in ignore and not (ignore_prefixes and k.startswith(ignore_prefixes))
    }
    for new_name, old_name in opts.get("var_name_mapping", {}).items():
        if old_name not in state:
            raise CheckpointError(f"{where}: var_name_mapping names {old_name!r}, which {path} does not hold.")
        state[new_name] = state.pop(old_name)
    own = model.state_dict()
    relevant = {k for k in own if k.startswith(prefix)}
    if not relevant:
        raise CheckpointError(f"{where}: the model has no parameters with prefix {prefix!r}.")
    loaded = relevant & set(state)
    if not loaded:
        raise CheckpointError(f"{where}: {path} holds none of the model's parameters with prefix {prefix!r}.")
    mismatched = [
        f"{k}: file {tuple(state[k].shape)} vs model {tuple(own[k].shape)}"
        for k in loaded
        if state[k].shape != own[k].shape
    ]
    if mismatched:
        raise CheckpointError(f"{where}: shapes differ: {'; '.join(mismatched)}.")
    missing = sorted(relevant - loaded)
    if missing and not opts.get("ignore_missing", False):
        raise CheckpointError(
            f"{where}: {path} lacks {len(missing)} of the model's parameters ({', '.join(missing[:8])}"
            f"{', ...' if len(missing) > 8 else ''}); set 'ignore_missing': True to keep them as initialized."
        )
    model.load_state_dict({k: state[k] for k in loaded}, strict=False)
    log.v3(
        f"{where}: loaded {len(loaded)} parameter tensors from {path}"
        + (f", {len(missing)} kept" if missing else "")
        + "."
    )
