"""RETURNN's choice of the checkpoint a run starts from: ``load``, ``start_epoch``, and ``load_model_post_hooks``.

``epoch_model`` is RETURNN's ``EngineBase.get_epoch_model`` (returnn/engine/base.py) over this run's checkpoints: the
same decision for the same options and files, tests/test_returnn_load.py compares the two. In short:

- task eval/forward: ``load`` names the checkpoint (its epoch: ``load_epoch``, else the number in its name, else the
  one it stores); without it, ``load_epoch`` or the newest of ``model``.
- task train, ``start_epoch = 'auto'`` (the default): the newest checkpoint of ``model`` resumes (a ``load`` is
  ignored then, as RETURNN notes); without one, ``import_model_train_epoch1``; without that, ``load``'s parameters
  start the training. A ``load`` whose name carries an epoch number (``model.005``) would continue at the next
  epoch, for which RETURNN's torch engine reads the optimizer state ``<model>.005.opt.pt`` of this run: a config
  error here, with the ways that work.
- task train, ``start_epoch = 1``: the training starts at epoch 1, from ``load``'s parameters if it is set, from
  scratch otherwise (existing checkpoints are not resumed, and are overwritten).
- task train, ``start_epoch = N > 1``: the checkpoint of epoch N-1 of ``model`` continues (``load_epoch``, if set, must
  be N-1); with ``load``, or without any checkpoint, the training starts at epoch 1 as RETURNN's does.

A training that starts from ``load``'s parameters starts as RETURNN's: epoch 1, a fresh optimizer, the global train
step of the checkpoint (its ``step``; ``global_step`` in this framework's; 1 for a plain state dict), ``get_model``
called with the checkpoint's epoch, and no ``preload_from_files`` entry with ``init_for_train`` applied. One from
``import_model_train_epoch1`` likewise continues the checkpoint's global train step, with ``get_model(epoch=0)`` and
the ``init_for_train`` entries applied.

``get_model`` always gets what RETURNN's torch engine (``_load_model``) gives it: the epoch of the checkpoint loaded
(0 for an import) and its global train step minus one, since RETURNN stores the step after counting it; a run
without a checkpoint gets epoch 1 and step 0. This holds for a resumed training (the last finished epoch, not the one
that starts), for eval and forward (whose steps then run at that step), and for an interrupted checkpoint (its epoch).
"""

from __future__ import annotations

import os
import re

import torch

from framework.base import log
from framework.base.config import Config
from framework.base.errors import ConfigError
from framework.base.options import register
from framework.base.util import accepted_kwargs

register(
    "load",
    "str | None",
    None,
    "RETURNN's checkpoint to load (a path, '.pt' optional; RETURNN's, this framework's or a plain state dict): for "
    "eval/forward the model's parameters; for training the parameters a training without a checkpoint of 'model' "
    "starts from (with start_epoch = 1: always), as RETURNN's engine chooses.",
    __name__,
)
register(
    "start_epoch",
    "int | str",
    "auto",
    "RETURNN's first epoch of a training: 'auto' resumes from the newest checkpoint of 'model'; 1 trains from scratch "
    "(or from 'load'); N > 1 continues from the checkpoint of epoch N-1.",
    __name__,
)
register(
    "load_model_post_hooks",
    "list | None",
    None,
    "RETURNN's functions hook(*, model, **kwargs), called once the model is built and its checkpoint (or 'load', "
    "'preload_from_files') loaded, before the optimizer's state is; in every task, fresh trainings too.",
    __name__,
)


def start_epoch_value(config: Config) -> int | None:
    """``start_epoch`` as RETURNN reads it: None for 'auto', else an int >= 1; ConfigError otherwise."""
    value = config.get("start_epoch")
    if value is None or value == "auto":
        return None
    try:
        number = int(value)
    except (TypeError, ValueError):
        number = 0
    if isinstance(value, bool) or number < 1:
        raise ConfigError(
            f"start_epoch = {value!r}: RETURNN takes 'auto' (resume from the newest checkpoint of 'model') or an "
            f"epoch >= 1 (1: train from scratch; N: continue from epoch N-1's checkpoint)."
        )
    return number


def load_path(config: Config, option: str = "load") -> str | None:
    """The file ``option`` (``load`` or ``import_model_train_epoch1``) names, as RETURNN finds it (a trailing '.pt'
    optional); ConfigError if there is none."""
    value = config.get(option) or ""
    if not value:
        return None
    pattern = _pattern(value)
    for path in (pattern + ".pt", pattern):
        if os.path.isfile(path):
            return path
    raise ConfigError(
        f"{option} = {value!r}: no file {pattern + '.pt'!r} (nor {pattern!r}); RETURNN stops on it too (config option "
        f"{option} does not exist). Give the path of an existing checkpoint, or delete the line."
    )


def _pattern(value: str) -> str:
    """RETURNN's ``get_checkpoint_filepattern``: the path without '.meta', '.index' or '.pt'."""
    for ext in (".meta", ".index", ".pt"):
        if value.endswith(ext):
            return value[: -len(ext)]
    return value


def epoch_in_name(path: str) -> int | None:
    """RETURNN's ``model_epoch_from_filename``: the number after the last dot of the name (links followed)."""
    while os.path.islink(path):
        path = os.path.join(os.path.dirname(path), os.readlink(path))
    match = re.match(r".*\.([0-9]+)", os.path.basename(_pattern(path)))
    return int(match.group(1)) if match else None


def final_epoch(config: Config) -> int:
    """RETURNN's ``config_get_final_epoch``: num_epochs, or load_epoch if that is larger."""
    return max(config.int("num_epochs"), config.get("load_epoch") or 0)


def epoch_model(config: Config, existing: dict[int, str], task: str) -> tuple[int | None, str | None]:
    """RETURNN's ``get_epoch_model``: (epoch, path) of the checkpoint the run starts from; ``existing`` are the
    checkpoints of ``model`` by epoch (those a training can resume from). (None, None): none; (0, path):
    ``import_model_train_epoch1``; (None, path) in training: ``load``'s parameters start a new training."""
    start_epoch = start_epoch_value(config)
    existing = {epoch: path for epoch, path in existing.items() if epoch <= final_epoch(config)}
    load = load_path(config)
    imported = config.get("import_model_train_epoch1") or None
    load_epoch = config.get("load_epoch") or -1
    training = task == "train"
    if load:
        if load_epoch <= 0:
            load_epoch = epoch_in_name(load) or -1
    elif load_epoch > 0:
        if load_epoch not in existing:
            raise ConfigError(
                f"load_epoch = {load_epoch}, but the checkpoints of {config.get('model')!r} are epochs "
                f"{sorted(existing)} (RETURNN stops on it too, with an AssertionError)."
            )
        load = existing[load_epoch]
    epoch: int | None
    if load and (not training or start_epoch is not None):
        if training and start_epoch is not None:
            if start_epoch > 1 and not config.get("load"):
                if load_epoch != start_epoch - 1:
                    raise ConfigError(
                        f"start_epoch {start_epoch} with load_epoch {load_epoch} is inconsistent: continuing the "
                        f"training at start_epoch loads epoch {start_epoch - 1} (RETURNN's ValueError). To import a "
                        f"model for a new training, use 'load' or 'import_model_train_epoch1'."
                    )
                epoch = load_epoch
            else:
                epoch = None  # a model imported for a new training: its epoch is not the training's
        else:
            epoch = load_epoch if load_epoch > 0 else None
        chosen: tuple[int | None, str | None] = (epoch, load)
    elif existing:
        chosen = (max(existing), existing[max(existing)])
        if load:
            log.v3(f"load = {config.get('load')!r} is not used: the training resumes from {chosen[1]}, as RETURNN's.")
    elif training and imported and start_epoch in (None, 1):
        chosen = (0, imported)
    elif load:
        chosen = (load_epoch if load_epoch > 0 else None, load)
    else:
        chosen = (None, None)
    if start_epoch == 1 and chosen[0]:
        log.v3(f"start_epoch = 1: the training starts from scratch; {chosen[1]} (epoch {chosen[0]}) is not loaded.")
        chosen = (None, None)
    elif (start_epoch or 0) > 1 and chosen[0]:
        if start_epoch - 1 not in existing:
            raise ConfigError(
                f"start_epoch = {start_epoch} continues the training from epoch {start_epoch - 1}'s checkpoint, but "
                f"the checkpoints of {config.get('model')!r} are epochs {sorted(existing)} (RETURNN stops with a "
                f"KeyError). Set start_epoch to one more than an existing epoch, or 'auto' to resume the newest."
            )
        if chosen[0] != start_epoch - 1:
            log.v3(f"start_epoch = {start_epoch}: the training continues from epoch {start_epoch - 1}, not {chosen}.")
        chosen = (start_epoch - 1, existing[start_epoch - 1])
    return chosen


def train_start_epoch(chosen: tuple[int | None, str | None]) -> int:
    """RETURNN's ``get_train_start_epoch`` for the checkpoint ``epoch_model`` chose."""
    return 1 if chosen[0] is None else chosen[0] + 1


def refuse_numbered_load(config: Config, chosen: tuple[int | None, str | None]) -> None:
    """A training that would continue from ``load``'s epoch: RETURNN's torch engine then reads the optimizer state of
    that epoch from this run's own model files, which do not exist (it is not a checkpoint of 'model')."""
    epoch, path = chosen
    prefix = config.get("model")
    return_opt = f"{prefix}.{epoch:03d}.opt.pt" if prefix else "<model>.NNN.opt.pt"
    raise ConfigError(
        f"load = {config.get('load')!r} names epoch {epoch} ({path}) and 'model' has no checkpoint to resume: RETURNN "
        f"would continue the training at epoch {epoch + 1} from its parameters and read the optimizer state "
        f"{return_opt}, which does not exist (its torch engine stops there with FileNotFoundError). To train from "
        f"its parameters from epoch 1, add start_epoch = 1 (or give it as import_model_train_epoch1); to continue "
        f"that training, set 'model' to its prefix."
    )


def read_load(path: str) -> tuple[dict[str, torch.Tensor], int | None, int | None]:
    """(parameters, stored epoch, stored global train step) of the checkpoint ``path``: RETURNN's (``model``, ``epoch``,
    ``step``), this framework's (``global_step``) or a plain state dict (no epoch or step)."""
    from framework.training.checkpoint import load_verified

    state = load_verified(path)
    if not isinstance(state, dict):
        raise ConfigError(f"load = {path!r} holds a {type(state).__name__}, not a checkpoint or state dict.")
    if "model" not in state:
        return state, None, None
    step = state.get("step", state.get("global_step"))
    return state["model"], state.get("epoch"), step


def call_post_hooks(config: Config, model: torch.nn.Module) -> None:
    """``load_model_post_hooks``: each ``hook(model=model)`` in order, as RETURNN's ``_load_model`` ends."""
    hooks = config.get("load_model_post_hooks")
    if not hooks:
        return
    if not isinstance(hooks, (list, tuple)) or not all(callable(hook) for hook in hooks):
        raise ConfigError(
            f"load_model_post_hooks must be a list of functions hook(*, model, **kwargs), as RETURNN calls them; got "
            f"{hooks!r}."
        )
    for hook in hooks:
        accepted = accepted_kwargs(hook)
        if accepted is not None and "model" not in accepted:
            raise ConfigError(
                f"load_model_post_hooks: {getattr(hook, '__name__', hook)!r} takes no argument 'model'; RETURNN calls "
                f"each hook as hook(model=model, **kwargs)."
            )
        hook(model=model)
