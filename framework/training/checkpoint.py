"""Checkpoints ``<model>.NNN.pt``: atomic writes, finding the newest, loading with clear errors.

A checkpoint holds everything a resumed run needs to continue bit for bit: model and
optimizer state, epoch, global step, RNG states and the learning-rate control state. It is
written to a temporary file, flushed to disk and renamed, so a crash at any moment leaves
either the complete new file or none; files load with ``torch.load(weights_only=True)``.
Ctrl-C or SIGTERM arriving during a write take effect after it, and a failed write (disk full,
I/O error) removes its temporary file and says so, leaving every earlier checkpoint untouched.
"""

from __future__ import annotations

import contextlib
import glob
import os
import re
import signal
import threading
from collections.abc import Iterator
from typing import Any

import torch

from framework import log
from framework.errors import CheckpointError, ConfigError, WriteError
from framework.training import disk

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
    """Delete temporary files that a run killed while writing a checkpoint left behind.

    A temporary file carries its writer's PID; one whose writer still runs is left alone.
    """
    for path in glob.glob(glob.escape(prefix) + ".*.pt" + _TMP_SUFFIX + "*"):
        match = re.search(re.escape(_TMP_SUFFIX) + r"(\d+)$", path)
        writer = int(match.group(1)) if match else None
        if writer is not None and writer != os.getpid() and _process_exists(writer):
            log.v2(f"Leaving {path} alone: process {writer}, which is writing it, still runs.")
            continue
        log.v4(f"Removing {path}: an incomplete checkpoint write from an interrupted run.")
        os.remove(path)


def _process_exists(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process
        return True
    return True


def save_checkpoint(path: str, state: dict[str, Any]) -> None:
    """Write ``state`` to ``path`` atomically: temp file, fsync, rename, fsync of the directory.

    WriteError if the write fails; the temp file is removed and nothing else touched.
    """
    directory = os.path.dirname(os.path.abspath(path))
    tmp = f"{path}{_TMP_SUFFIX}{os.getpid()}"
    with signals_deferred(f"the write of {path}"):
        try:
            os.makedirs(directory, exist_ok=True)
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
        except (OSError, RuntimeError) as exc:  # torch.save's writer raises RuntimeError for I/O errors
            with contextlib.suppress(OSError):
                os.remove(tmp)
            raise WriteError(_write_failure_message(path, exc, state)) from None


def _write_failure_message(path: str, exc: BaseException, state: dict[str, Any]) -> str:
    directory = os.path.dirname(os.path.abspath(path))
    free = disk.free_bytes(directory)
    space = f"; {disk.format_size(free)} free there" if free is not None else ""
    needed = f", a checkpoint needs about {disk.format_size(state_bytes(state))}"
    prefix = path[: -len(".pt")].rsplit(".", 1)[0]
    earlier = list_checkpoints(prefix)
    kept = (
        f"Earlier checkpoints are untouched (newest: {earlier[max(earlier)]}); "
        f"the same command resumes from it once the problem is fixed."
        if earlier
        else "No earlier checkpoint exists."
    )
    return (
        f"Writing checkpoint {path} failed: {disk.describe_os_error(exc)}{space}{needed}. The partial file was "
        f"removed. {kept} Free space or choose another directory with the 'model' option."
    )


def state_bytes(state: Any) -> int:
    """Bytes of the tensors in a (nested) checkpoint state: about the size of its file."""
    if isinstance(state, torch.Tensor):
        return state.numel() * state.element_size()
    if isinstance(state, dict):
        return sum(state_bytes(v) for v in state.values())
    if isinstance(state, (list, tuple)):
        return sum(state_bytes(v) for v in state)
    return 0


def check_room(prefix: str, model: torch.nn.Module, optimizer: torch.optim.Optimizer) -> None:
    """ConfigError at startup if the file system of ``prefix`` cannot hold one more checkpoint."""
    free = disk.free_bytes(os.path.dirname(os.path.abspath(prefix)))
    needed = estimated_checkpoint_bytes(model, optimizer)
    if free is not None and free < needed:
        raise ConfigError(
            f"The directory of model {prefix!r} has {disk.format_size(free)} free, but a checkpoint of this model "
            f"needs about {disk.format_size(needed)}: the first checkpoint would fail after a whole epoch. Nothing "
            f"was trained. Free space or choose another directory with the 'model' option."
        )


def estimated_checkpoint_bytes(model: torch.nn.Module, optimizer: torch.optim.Optimizer) -> int:
    """A lower bound of a checkpoint's size; a fresh optimizer's state is counted as it will be after one step."""
    size = state_bytes(model.state_dict()) + state_bytes(optimizer.state_dict())
    if not optimizer.state:  # created lazily at the first step
        name = type(optimizer).__name__
        momentum = any(group.get("momentum") for group in optimizer.param_groups)
        slots = 2 if "Adam" in name else 1 if name in ("RMSprop", "Adagrad") or momentum else 0
        size += slots * sum(p.numel() * p.element_size() for p in model.parameters() if p.requires_grad)
    return size


@contextlib.contextmanager
def signals_deferred(what: str) -> Iterator[None]:
    """SIGINT, SIGTERM and SIGHUP arriving inside take effect after it: a second Ctrl-C must not cut a write in half.

    Only the main thread can set signal handlers; elsewhere this does nothing.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    received: list[tuple[int, Any]] = []

    def note(signum: int, frame: Any) -> None:
        received.append((signum, frame))
        log.v1(f"{signal.Signals(signum).name}: finishing {what} first.")

    previous = {signum: signal.signal(signum, note) for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)}
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
        for signum, frame in received:
            handler = previous[signum]
            if callable(handler):
                try:
                    handler(signum, frame)
                except BaseException as exc:
                    exc.add_note(f"[framework] {what} was completed before this signal took effect.")
                    raise
            elif handler != signal.SIG_IGN:
                signal.raise_signal(signum)


def load_checkpoint(path: str) -> dict[str, Any]:
    """Load a checkpoint on the CPU with ``weights_only=True``; CheckpointError if unreadable."""
    if not os.path.isfile(path):
        raise CheckpointError(f"Checkpoint {path} does not exist.")
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:  # torch raises many kinds (pickle, zip, runtime) for a damaged file
        raise CheckpointError(
            f"Checkpoint {path} cannot be read ({_load_failure_reason(exc)}). It is damaged or not a checkpoint "
            f"of this framework. It was left untouched; move it away to resume from the previous epoch's checkpoint."
        ) from None
    if not isinstance(state, dict) or "model" not in state or "epoch" not in state:
        raise CheckpointError(f"Checkpoint {path} is not a framework checkpoint (no 'model'/'epoch' entries).")
    return state


def _load_failure_reason(exc: Exception) -> str:
    """Why torch.load failed, without torch's advice to load with weights_only=False (which runs the file's code)."""
    text = str(exc)
    if "Weights only load failed" in text:
        found = re.search(r"GLOBAL ([\w.]+)", text)
        what = f" (it refers to {found.group(1)})" if found else ""
        return (
            f"it holds Python objects other than tensors and plain data{what}, and checkpoints are loaded without "
            f"running code from the file"
        )
    return f"{type(exc).__name__}: {text.splitlines()[0] if text else ''}"


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
