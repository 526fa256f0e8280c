"""Checkpoints ``<model>.NNN.pt``: atomic writes, finding the newest, loading with clear errors.

A checkpoint holds everything a resumed run needs to continue bit for bit: model and
optimizer state, epoch, global step, RNG states and the learning-rate control state. It is
written to a temporary file (created without following a link, ``safe_create``), flushed to
disk and renamed, so a crash at any moment leaves either the complete new file or none. Ctrl-C
or SIGTERM arriving during a write take effect after it, and a failed write (disk full, I/O
error) removes its temporary file and says so, leaving every earlier checkpoint untouched.

A file is trusted only once verified: every record's CRC-32 (``checkpoint_integrity``) before
``torch.load(weights_only=True)``, the entries a resume needs, and finite parameters. A damaged
file is refused with the newest intact checkpoint named; nothing resumes from an older one
without the user moving the damaged file away.
"""

from __future__ import annotations

import contextlib
import glob
import os
import re
import shlex
import signal
import stat
import threading
from collections.abc import Callable, Iterator
from typing import Any

import torch
import torch.utils.serialization.config as serialization_config
from torch.nn.parameter import is_lazy

from framework.base import disk, log
from framework.base.errors import CheckpointError, ConfigError, WriteError
from framework.base.options import register
from framework.base.safe_create import create_new, file_kind
from framework.base.util import printable
from framework.training import fsdp
from framework.training.checkpoint_integrity import damage

register(
    "output_dir",
    "str | None",
    None,
    "Where the shipped configs put this run's files (checkpoints, logs, TensorBoard, images): "
    "framework.run_output_dir(), output/<config file names joined by '+'>. ++output_dir moves them.",
    __name__,
)
register(
    "model",
    "str | None",
    None,
    "Checkpoint path prefix: writes <model>.001.pt, ...; a rerun resumes from the newest one. None: no checkpoints.",
    __name__,
)
register(
    "load_epoch",
    "int | None",
    None,
    "Checkpoint epoch to load for eval/forward (None: newest).",
    __name__,
    range="[1, inf)",
)
register(
    "frozen_params",
    "list[str]",
    [],
    "Parameter name patterns (fnmatch) that must not change in training; the sanity and gradient checks verify it.",
    __name__,
)
register(
    "import_model_train_epoch1",
    "str | None",
    None,
    "Checkpoint whose parameters start a fresh training (e.g. from framework-import-torch-model); ignored on resume.",
    __name__,
)
register(
    "save_interval",
    "int",
    1,
    "Write the epoch checkpoint every this many epochs, and after the last (RETURNN's option).",
    __name__,
    range="[1, inf)",
)
register(
    "preload_from_files",
    "dict | None",
    None,
    "RETURNN's {name: {'filename': ckpt, 'prefix', 'checkpoint_key', 'ignore_missing', 'var_name_mapping', "
    "'init_for_train'}}: parameters loaded into the model (init_for_train: when a training starts fresh).",
    __name__,
)

register(
    "resume_learning_rate",
    "str",
    "checkpoint",
    "On resume, whose learning rate counts: the checkpoint's schedule (RETURNN's rule) or the config's learning_rate from the resumed epoch on.",
    "framework.training.resume",
    choices=("checkpoint", "config"),
)


_TMP_SUFFIX = ".tmp"
_writes_in_progress = 0


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


def newest_checkpoint(prefix: str) -> str | None:
    """The file a resume of ``prefix`` starts from: the mid-epoch checkpoint if any, else the newest epoch's."""
    if os.path.exists(interrupted_path(prefix)):
        return interrupted_path(prefix)
    found = list_checkpoints(prefix)
    return found[max(found)] if found else None


def write_in_progress() -> bool:
    """Whether a checkpoint is being written now (in any thread)."""
    return _writes_in_progress > 0


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
    global _writes_in_progress
    directory = os.path.dirname(os.path.abspath(path))
    tmp = f"{path}{_TMP_SUFFIX}{os.getpid()}"
    _writes_in_progress += 1
    with signals_deferred(f"the write of {path}"):
        try:
            os.makedirs(directory, exist_ok=True)
            # The CRC-32s are what a load verifies: on even if a config switched them off for its own saves.
            with (
                os.fdopen(create_new(tmp, "a checkpoint being written"), "wb") as f,
                serialization_config.patch({"save.compute_crc32": True}),
            ):
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
        finally:
            _writes_in_progress -= 1


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


# What a resumed training reads from a checkpoint (Engine._checkpoint_state writes them), what it can do
# without (written by older versions) and what a mid-epoch (interrupted) checkpoint adds.
RESUME_KEYS = {
    "model": "the parameters",
    "optimizer": "the optimizer state",
    "epoch": "the epoch",
    "global_step": "the step count",
    "rng": "the random generators' states",
    "learning_rate_control": "the learning rates and scores so far",
}
OPTIONAL_KEYS = ("options", "plugins")
MID_EPOCH_KEYS = ("next_step", "scores")
_NEW_TRAINING = "give it as ++import_model_train_epoch1 {path} with a new ++model prefix to train from its parameters"


def load_verified(path: str) -> Any:
    """What the file ``path`` holds, loaded on the CPU after verifying every record's CRC-32: every checkpoint or
    state dict the framework reads (resume, eval, forward, preload_from_files, the tools) is read this way, so a
    damaged one is refused with the same CheckpointError wherever it is read."""
    _check_loadable(path)
    try:
        return torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:  # torch raises many kinds (pickle, zip, runtime) for a file it cannot take
        raise CheckpointError(
            f"Checkpoint {path} cannot be read ({_load_failure_reason(exc)}). It is damaged or not a checkpoint "
            f"of this framework, and was left untouched. {_newest_other_advice(path, _is_intact, 'intact')}"
        ) from None


def load_checkpoint(path: str) -> dict[str, Any]:
    """Load a checkpoint of this framework (``load_verified``); CheckpointError if it cannot be trusted or is not one."""
    state = load_verified(path)
    if not isinstance(state, dict) or "model" not in state or "epoch" not in state:
        raise CheckpointError(_not_ours_message(path, state))
    return state


def load_inference_state(path: str) -> dict[str, Any]:
    """``load_checkpoint`` for evaluation or forwarding: CheckpointError if it lacks what building the model reads."""
    state = load_checkpoint(path)
    if "global_step" not in state:
        raise CheckpointError(
            f"Checkpoint {path} lacks 'global_step' (the step count that get_model is called with), so it was written "
            f"by an older version of the framework or by another tool; nothing was evaluated. Evaluate it with the "
            f"version that wrote it, or make a checkpoint of its parameters: framework-import-torch-model "
            f"your_config.py --state-dict {shlex.quote(path)} --out {shlex.quote(_imported_path(path))}, then "
            f"++model {shlex.quote(_imported_path(path).removesuffix('.001.pt'))}."
        )
    return state


def _imported_path(path: str) -> str:
    """Where the import advice writes the checkpoint made of ``path``'s parameters: a prefix of its own, epoch 1."""
    return os.path.join(os.path.dirname(path), "imported.001.pt")


def _not_ours_message(path: str, state: Any) -> str:
    """Why ``state`` (what ``path`` holds) is not a framework checkpoint, and how to use its parameters anyway."""
    tensors = isinstance(state, dict) and state and all(isinstance(v, torch.Tensor) for v in state.values())
    what = (
        f"a plain state_dict ({len(state)} tensors, no 'model'/'epoch' entries)"
        if tensors
        else "not a framework checkpoint (no 'model'/'epoch' entries)"
    )
    imported = _imported_path(path)
    return (
        f"Checkpoint {path} is {what}; nothing was loaded. To use its parameters, import them into a checkpoint of "
        f"your config's model (names are mapped, shapes checked): framework-import-torch-model your_config.py "
        f"--state-dict {shlex.quote(path)} --out {shlex.quote(imported)}; then train from it with "
        f"++import_model_train_epoch1 {shlex.quote(imported)} and a new ++model prefix, or evaluate it with "
        f"++model {shlex.quote(imported.removesuffix('.001.pt'))}."
        + (
            f" A state_dict whose names are the model's also starts a training as it is, RETURNN's way: "
            f"++preload_from_files {shlex.quote(_PRELOAD % path)} with a new ++model prefix."
            if tensors
            else ""
        )
    )


# A plain state_dict as RETURNN's preload_from_files takes it when a training starts (framework.training.preload).
_PRELOAD = "{'init': {'filename': %r, 'checkpoint_key': None, 'init_for_train': True}}"


def load_training_state(path: str) -> dict[str, Any]:
    """``load_checkpoint`` for a resume: CheckpointError if entries a resume reads are missing or unknown ones present.

    Unknown entries come from a newer version: resuming would drop them at the next checkpoint.
    """
    state = load_checkpoint(path)
    needed = list(RESUME_KEYS) + (list(MID_EPOCH_KEYS) if any(k in state for k in MID_EPOCH_KEYS) else [])
    missing = [key for key in needed if key not in state]
    if missing:
        what = ", ".join(f"{key!r} ({RESUME_KEYS.get(key, 'where the epoch stopped')})" for key in missing)
        raise CheckpointError(
            f"Checkpoint {path} lacks {what}, which a resumed training needs. It was written by an older version "
            f"of the framework or by another tool, so this run cannot continue it exactly and did not start; "
            f"nothing was changed. Continue it with the version that wrote it, or "
            f"{_NEW_TRAINING.format(path=shlex.quote(path))}."
        )
    unknown = sorted(set(state) - set(RESUME_KEYS) - set(OPTIONAL_KEYS) - set(MID_EPOCH_KEYS), key=str)
    if unknown:
        raise CheckpointError(
            f"Checkpoint {path} holds entries this version of the framework does not know: "
            f"{printable(', '.join(map(repr, unknown)))}. It was probably written by a newer version; resuming "
            f"here would drop them at the next checkpoint, so this run did not start and nothing was changed. "
            f"Continue it with the version that wrote it, or {_NEW_TRAINING.format(path=shlex.quote(path))}."
        )
    return state


def _check_loadable(path: str) -> None:
    """CheckpointError unless ``path`` is a readable regular file whose records all match their CRC-32."""
    try:
        info = os.stat(path)
    except FileNotFoundError:
        raise CheckpointError(f"Checkpoint {path} does not exist.") from None
    except OSError as exc:
        raise CheckpointError(_unreadable_message(path, exc)) from None
    if not stat.S_ISREG(info.st_mode):
        kind = "a directory" if stat.S_ISDIR(info.st_mode) else f"{file_kind(info)}, not a regular file"
        raise CheckpointError(
            f"{path} is {kind}, but its name is that of a checkpoint, so it is taken for one. Nothing was loaded or "
            f"changed. Move it away (mv {shlex.quote(path)} {shlex.quote(path + '.moved')}) or give the model "
            f"another prefix."
        )
    try:
        legacy = _in_legacy_format(path)
    except OSError as exc:
        raise CheckpointError(_unreadable_message(path, exc)) from None
    if legacy:
        converted = shlex.quote(re.sub(r"(\.pt)?$", ".zip.pt", path, count=1))
        convert = f"torch.save(torch.load({path!r}, weights_only=True), {converted!r})"
        raise CheckpointError(
            f"Checkpoint {path} is in torch's legacy serialization format (torch.save before torch 1.6, or "
            f"_use_new_zipfile_serialization=False), not the zip format whose records carry the checksums this "
            f"framework verifies; it is not damaged and was left untouched. Convert it once: python -c "
            f"{shlex.quote('import torch; ' + convert)}, then use the converted file (a plain state_dict: import "
            f"it with framework-import-torch-model your_config.py --state-dict {converted} --out imported.001.pt)."
        )
    try:
        problem = damage(path)
    except OSError as exc:
        raise CheckpointError(_unreadable_message(path, exc)) from None
    if problem:
        raise CheckpointError(
            f"Checkpoint {path} is damaged: {printable(problem)}. It was not loaded and was left untouched. "
            f"{_newest_other_advice(path, _is_intact, 'intact')}"
        )


# What torch.save's legacy format starts with: its magic number, pickled with protocol 2.
_LEGACY_MAGIC = b"\x80\x02\x8a\x0al\xfc\x9cF\xf9 j\xa8P\x19."


def _in_legacy_format(path: str) -> bool:
    with open(path, "rb") as f:
        return f.read(len(_LEGACY_MAGIC)) == _LEGACY_MAGIC


def _unreadable_message(path: str, exc: OSError) -> str:
    reason = os.strerror(exc.errno) if exc.errno else str(exc)
    return (
        f"Checkpoint {path} cannot be read ({reason}). The file may well be intact; nothing was loaded or changed. "
        f"Make it readable for this user (ls -l {shlex.quote(path)} shows its owner and permissions), or run as the "
        f"user who wrote it."
    )


def _is_intact(path: str) -> bool:
    try:
        return damage(path) is None
    except OSError:
        return False


def _newest_other_advice(path: str, usable: Callable[[str], bool], adjective: str) -> str:
    """Which other checkpoint of the same prefix to continue from, and how (a path of no prefix: restore it)."""
    match = re.fullmatch(r"(.+)\.(\d{3,}|interrupted)\.pt", path)
    if match is None:
        return "Restore it from a copy or write it again."
    prefix, moved = match.group(1), f"mv {shlex.quote(path)} {shlex.quote(path + '.damaged')}"
    for epoch, other in sorted(list_checkpoints(prefix).items(), reverse=True):
        if other != path and usable(other):
            return (
                f"The newest {adjective} checkpoint is {other} (epoch {epoch}). To continue from it, move this one "
                f"away ({moved}) and run the same command again; what came after epoch {epoch} is trained again."
            )
    return f"No other checkpoint of {prefix!r} is {adjective}: move this one away ({moved}) and train from the start."


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
    return printable(f"{type(exc).__name__}: {text.splitlines()[0] if text else ''}")  # it may quote the file


def load_model_state(model: torch.nn.Module, state_dict: dict[str, torch.Tensor], path: str) -> None:
    """Load parameters into ``model``; CheckpointError listing every missing, unexpected or misshaped key."""
    own = model.state_dict()
    missing = [k for k in own if k not in state_dict]
    unexpected = [k for k in state_dict if k not in own]
    mismatched = [
        f"{k}: checkpoint {tuple(state_dict[k].shape)} vs model {tuple(own[k].shape)}"
        for k in own
        if k in state_dict and not is_lazy(own[k]) and tuple(own[k].shape) != tuple(state_dict[k].shape)
    ]  # a lazy module takes its shapes from the checkpoint
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
    bad = non_finite_entries(model, state_dict)
    if bad:
        advice = _newest_other_advice(path, lambda other: _has_finite_parameters(model, other), "finite")
        raise CheckpointError(
            f"Checkpoint {path} holds non-finite values: {'; '.join(bad)}. A model with them computes NaN from its "
            f"first step, so it was not loaded. The run that wrote it diverged without debug_check_numerics, or "
            f"the file was changed after writing. {advice}"
        )
    model.load_state_dict(fsdp.sharded_like(own, state_dict))  # under FSDP: this rank's slices


def non_finite_entries(model: torch.nn.Module, state_dict: dict[str, torch.Tensor]) -> list[str]:
    """``0.weight: 3 NaN, 1 inf of 32 values`` for each parameter holding NaN or inf, and each buffer holding NaN
    (buffers may hold inf on purpose, e.g. an attention mask)."""
    parameters = {name for name, _ in model.named_parameters(remove_duplicate=False)}
    found = []
    for name, value in state_dict.items():
        if not (isinstance(value, torch.Tensor) and (value.is_floating_point() or value.is_complex())):
            continue
        if bool(torch.isfinite(value).all()):  # one pass over the healthy ones; counting only for the report
            continue
        nan = int(torch.isnan(value).sum())
        inf = int(torch.isinf(value).sum()) if name in parameters else 0
        if nan or inf:
            counts = ", ".join(f"{n} {kind}" for n, kind in ((nan, "NaN"), (inf, "inf")) if n)
            kind = "parameter" if name in parameters else "buffer"
            found.append(f"{kind} {name}: {counts} of {value.numel()} values")
    return found


def _has_finite_parameters(model: torch.nn.Module, path: str) -> bool:
    try:
        saved = load_checkpoint(path)
    except CheckpointError:
        return False
    return not non_finite_entries(model, saved["model"])


def load_optimizer_state(optimizer: torch.optim.Optimizer, saved: dict[str, Any]) -> None:
    """Load a checkpoint's optimizer state (whole tensors) into ``optimizer``, cut like its parameters if sharded."""
    optimizer.load_state_dict(fsdp.sharded_optimizer_state(optimizer, saved))
