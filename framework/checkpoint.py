"""Checkpoints ``<model>.NNN.pt``: atomic writes, finding the newest, loading with clear errors.

A checkpoint holds everything a resumed run needs to continue bit for bit: model and
optimizer state, epoch, global step, RNG states and the learning-rate control state. It is
written to a temporary file, flushed to disk and renamed, so a crash at any moment leaves
either the complete new file or none; files load with ``torch.load(weights_only=True)``.
"""

from __future__ import annotations

import glob
import os
import re
from typing import Any

import torch

from framework import log
from framework.errors import CheckpointError

_TMP_SUFFIX = ".tmp"


def checkpoint_path(prefix: str, epoch: int) -> str:
    """``output/model.003.pt`` for prefix ``output/model`` and epoch 3."""
    return f"{prefix}.{epoch:03d}.pt"


def interrupted_path(prefix: str) -> str:
    """Where a run stopped mid-epoch (Ctrl-C) keeps its state: ``<model>.interrupted.pt``."""
    return f"{prefix}.interrupted.pt"


def remove_interrupted(prefix: str) -> None:
    """Delete the mid-epoch checkpoint once an epoch checkpoint supersedes it."""
    path = interrupted_path(prefix)
    if os.path.exists(path):
        log.v4(f"Removing {path}: superseded by a complete epoch checkpoint.")
        os.remove(path)


def list_checkpoints(prefix: str) -> dict[int, str]:
    """Complete checkpoints of ``prefix`` by epoch (temporary files of interrupted writes excluded)."""
    pattern = re.compile(re.escape(os.path.basename(prefix)) + r"\.(\d{3,})\.pt$")
    found = {}
    for path in glob.glob(glob.escape(prefix) + ".*.pt"):
        match = pattern.fullmatch(os.path.basename(path))
        if match:
            found[int(match.group(1))] = path
    return dict(sorted(found.items()))


def remove_stale_temp_files(prefix: str) -> None:
    """Delete temporary files that a run killed while writing a checkpoint left behind."""
    for path in glob.glob(glob.escape(prefix) + ".*.pt" + _TMP_SUFFIX + "*"):
        log.v4(f"Removing {path}: an incomplete checkpoint write from an interrupted run.")
        os.remove(path)


def save_checkpoint(path: str, state: dict[str, Any]) -> None:
    """Write ``state`` to ``path`` atomically: temp file, fsync, rename, fsync of the directory."""
    directory = os.path.dirname(os.path.abspath(path))
    os.makedirs(directory, exist_ok=True)
    tmp = f"{path}{_TMP_SUFFIX}{os.getpid()}"
    with open(tmp, "wb") as f:
        torch.save(state, f)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    dir_fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)


def load_checkpoint(path: str) -> dict[str, Any]:
    """Load a checkpoint on the CPU with ``weights_only=True``; CheckpointError if unreadable."""
    if not os.path.isfile(path):
        raise CheckpointError(f"Checkpoint {path} does not exist.")
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:  # torch raises many kinds (pickle, zip, runtime) for a damaged file
        raise CheckpointError(
            f"Checkpoint {path} cannot be read ({type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}). "
            f"It is damaged or not a checkpoint of this framework. It was left untouched; move it away to resume "
            f"from the previous epoch's checkpoint."
        ) from None
    if not isinstance(state, dict) or "model" not in state or "epoch" not in state:
        raise CheckpointError(f"Checkpoint {path} is not a framework checkpoint (no 'model'/'epoch' entries).")
    return state


def load_model_state(model: torch.nn.Module, state_dict: dict[str, torch.Tensor], path: str) -> None:
    """Load parameters into ``model``; CheckpointError listing every missing, unexpected or misshaped key."""
    own = model.state_dict()
    missing = [k for k in own if k not in state_dict]
    unexpected = [k for k in state_dict if k not in own]
    mismatched = [
        f"{k}: checkpoint {tuple(state_dict[k].shape)} vs model {tuple(own[k].shape)}"
        for k in own
        if k in state_dict and tuple(own[k].shape) != tuple(state_dict[k].shape)
    ]
    if missing or unexpected or mismatched:
        parts = []
        if missing:
            parts.append(f"missing in checkpoint: {', '.join(missing)}")
        if unexpected:
            parts.append(f"not in model: {', '.join(unexpected)}")
        if mismatched:
            parts.append(f"shape mismatch: {'; '.join(mismatched)}")
        raise CheckpointError(
            f"Checkpoint {path} does not fit the model from get_model ({'. '.join(parts)}). Did the model definition "
            f"change since it was written? Use another 'model' path to train from scratch."
        )
    model.load_state_dict(state_dict)
