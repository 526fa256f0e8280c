"""The checkpoints of one run: what the engine saves, what a run loads to resume or to infer, and what is verified.

The engine decides when (``due``, a stop or a periodic mid-epoch save) and emits the events; this module holds
the rest: the lock on the model prefix, the newest training state (an epoch checkpoint or a newer interrupted one),
restoring model, optimizer, learning-rate control, RNG and the plugins' saved states, the position inside an
interrupted epoch, and the contents of a checkpoint. The files themselves (atomic writes, integrity checks) are
``checkpoint``'s.
"""

from __future__ import annotations

import dataclasses
import os
from typing import Any

from framework.base import disk, log
from framework.base.config import Config
from framework.base.errors import CheckpointError, ConfigError, TrainingInterrupted
from framework.base.returnn_options import is_returnn_config
from framework.base.rng import get_rng_state, set_rng_state
from framework.base.util import command_line
from framework.core.plugin import Plugin
from framework.core.scores import ScoreAccumulator, rank_share, to_host
from framework.core.state import RunState
from framework.training import checkpoint, fsdp, preload, resume, returnn_forward, start_checkpoint
from framework.training.run_lock import RunLock

# A checkpoint a new training starts from: (path, parameters, the epoch and global train step it stores; None: none)
Loaded = tuple[str, dict[str, Any], int | None, int | None]


@dataclasses.dataclass
class StartFrom:
    """What a training that resumes no checkpoint starts from: ``import_model_train_epoch1`` where RETURNN applies it
    (``imported``), or ``load``; neither: from scratch."""

    imported: Loaded | None = None
    load: Loaded | None = None

    def model_arguments(self) -> tuple[int, int, int]:
        """(epoch, step) that ``get_model`` gets and the global train step the training starts at, as RETURNN's
        ``_load_model`` gives them: the checkpoint's epoch (0 for an import: RETURNN's 'epoch 0' model; the stored
        one, else 1, for ``load``) and its step minus one, as RETURNN stores the step after counting it (a checkpoint
        without one counts as step 1); the training then continues at the stored step. From scratch: 1, 0, 0."""
        if self.imported is not None:
            step = 1 if self.imported[3] is None else self.imported[3]
            return 0, step - 1, step
        if self.load is not None:
            step = 1 if self.load[3] is None else self.load[3]
            return (1 if self.load[2] is None else self.load[2]), step - 1, step
        return 1, 0, 0


class RunCheckpoints:
    """Saving, finding and restoring the checkpoints of the run whose state is ``state``."""

    def __init__(self, config: Config, state: RunState):
        self.config = config
        self.state = state
        self._resume: dict[str, Any] | None = None  # mid-epoch position from an interrupted checkpoint
        self._lock: RunLock | None = None  # held while this process writes checkpoints of the model prefix
        self._plugin_states: tuple[str, dict[str, Any]] | None = None  # (checkpoint, states) to give the plugins

    def writes(self) -> str | None:
        """The checkpoint prefix if this process writes checkpoints (rank 0 of a distributed run)."""
        distributed = self.state.distributed
        return self.config.get("model") if distributed is None or distributed.rank == 0 else None

    # ------------------------------------------------------------------------------ the prefix
    def lock_prefix(self) -> None:
        """Before anything is loaded: the model directory is writable and no other run writes this prefix."""
        prefix = self.writes()
        if prefix:
            disk.probe_directory(os.path.dirname(prefix), "model directory", "model")
            self._lock = RunLock(prefix)
            self._lock.acquire()

    def release(self) -> None:
        """Give back the lock on the model prefix (if this run took it)."""
        if self._lock is not None:
            self._lock.release()

    def listing(self) -> str | None:
        """For the run's summary: the newest checkpoint files and the number of epoch checkpoints (None: this process
        writes no checkpoints)."""
        prefix = self.writes()
        if not prefix:
            return None
        found = checkpoint.list_checkpoints(prefix)
        interrupted = checkpoint.interrupted_path(prefix)
        newest = [found[max(found)]] if found else []
        newest += [interrupted] if os.path.exists(interrupted) else []
        return ", ".join(newest) + f" ({len(found)} epoch checkpoint(s))" if newest else "none"

    # --------------------------------------------------------------------------------- loading
    def newest_training_state(self) -> tuple[str | None, dict[str, Any] | None]:
        """The newest epoch checkpoint of ``model``, or an interrupted (mid-epoch) one if that is newer."""
        prefix = self.config.get("model")
        if not prefix:
            return None, None
        writes = self.writes()
        if writes:
            checkpoint.remove_stale_temp_files(prefix)
        found = checkpoint.list_checkpoints(prefix)
        path = found[max(found)] if found else None
        interrupted = checkpoint.interrupted_path(prefix)
        if os.path.exists(interrupted):
            saved = checkpoint.load_training_state(interrupted)
            if saved["epoch"] > (max(found) if found else 0):
                return interrupted, saved
            # An epoch checkpoint covers it. Other ranks may be reading it now: there, the next epoch's write removes it.
            if writes and self.state.distributed is None:
                checkpoint.remove_interrupted(prefix)
        return path, checkpoint.load_training_state(path) if path else None

    def check_room(self) -> None:
        """Before training: the disk has room for a checkpoint of the model and optimizer (if this process writes)."""
        prefix = self.writes()
        if prefix:
            checkpoint.check_room(prefix, self.state.model, self.state.optimizer)

    def training_start(self) -> tuple[str | None, dict[str, Any] | None, StartFrom | None]:
        """Where a training starts, as RETURNN's engine chooses it (``start_checkpoint.epoch_model``): (path, saved) of
        the checkpoint of 'model' it resumes from, or (None, None, what a new training starts from)."""
        config = self.config
        if not config.get("load") and start_checkpoint.start_epoch_value(config) is None:
            path, saved = self.newest_training_state()  # RETURNN's 'auto': the newest, or an interrupted one
            return path, saved, None if saved is not None else self._new_training(imported=True)
        prefix = config.get("model")
        existing = checkpoint.list_checkpoints(prefix) if prefix else {}
        chosen = start_checkpoint.epoch_model(config, existing, "train")
        epoch, path = chosen
        if path is None or epoch == 0:  # from scratch, or import_model_train_epoch1 (epoch 0)
            return None, None, self._new_training(imported=epoch == 0)
        if epoch is None:  # 'load' starts a new training
            return None, None, StartFrom(load=(path, *start_checkpoint.read_load(path)))
        if existing.get(epoch) != path:
            start_checkpoint.refuse_numbered_load(config, chosen)
        if start_checkpoint.start_epoch_value(config) is None:
            path, saved = self.newest_training_state()
            return path, saved, None
        log.v3(f"start_epoch = {epoch + 1}: continuing from {path}.")
        return path, checkpoint.load_training_state(path), None

    def _new_training(self, imported: bool) -> StartFrom:
        """A training from scratch, or from ``import_model_train_epoch1``'s checkpoint where RETURNN applies it
        (``imported``) and it is set."""
        path = start_checkpoint.load_path(self.config, "import_model_train_epoch1") if imported else None
        return StartFrom(imported=None if path is None else (path, *start_checkpoint.read_load(path)))

    def load_initial_parameters(self, start: StartFrom) -> None:
        """A new training run: the parameters of ``import_model_train_epoch1`` (where RETURNN applies it) or of
        ``load``, then ``preload_from_files`` (its init_for_train entries unless from ``load``, as in RETURNN)."""
        if start.load is not None:
            path, parameters, _, _ = start.load
            checkpoint.load_model_state(self.state.model, parameters, path)
            log.v3(f"Training starts at epoch 1 from the parameters of {path} (load).")
        elif start.imported is not None:
            path, parameters, _, _ = start.imported
            checkpoint.load_model_state(self.state.model, parameters, path)
            log.v3(f"Training starts from the parameters of {path} (import_model_train_epoch1).")
        if start.load is None or start.load[2] == 0:  # RETURNN: only a first train epoch (no stored epoch) preloads
            preload.preload_from_files(self.config, self.state.model, training=True)

    def restore(self, saved: dict[str, Any], path: str, next_epoch: int, after_model: Any = None) -> None:
        """Model, optimizer, learning-rate control and RNG from checkpoint ``saved`` (read from ``path``); the
        plugins' states and the position in an interrupted epoch are kept for when the plugins and the epoch start.
        ``after_model()``: called once the parameters are loaded, before the optimizer's state."""
        state = self.state
        checkpoint.load_model_state(state.model, saved["model"], path)
        if after_model is not None:
            after_model()
        try:
            checkpoint.load_optimizer_state(state.optimizer, saved["optimizer"])
        except (ValueError, KeyError) as exc:
            raise CheckpointError(
                f"Checkpoint {path}: the optimizer state does not fit the configured optimizer "
                f"({exc}). Did 'optimizer' change since it was written?"
            ) from None
        state.lr_control.load_state_dict(saved["learning_rate_control"])
        set_rng_state(saved["rng"])
        # The plugins are built later (load_plugin_states); a checkpoint older than plugin states has none.
        self._plugin_states = (path, saved.get("plugins", {}))
        log.v3(f"Resuming from {path}: epoch {saved['epoch']}, global step {saved['global_step']}.")
        resume.report_changes(self.config, saved, state.lr_control, next_epoch)
        if "next_step" in saved:
            self._resume = {"epoch": saved["epoch"], "next_step": saved["next_step"], "scores": saved["scores"]}

    def load_plugin_states(self, plugins: list[Plugin]) -> None:
        """Give each plugin the state it saved in the checkpoint this run resumes from (before STARTUP, which
        starts from it); a plugin the checkpoint has nothing for (off then, or an older checkpoint) starts fresh."""
        if self._plugin_states is None:
            return
        (path, saved), self._plugin_states = self._plugin_states, None
        built = {plugin.name: plugin for plugin in plugins}
        for name, plugin_state in saved.items():
            plugin = built.get(name)
            if plugin is None:
                log.v4(f"Checkpoint {path}: the saved state of plugin {name} is not used: {name} is off in this run.")
                continue
            try:
                plugin.load_state_dict(plugin_state)
            except (KeyError, TypeError, ValueError, RuntimeError) as exc:
                raise CheckpointError(
                    f"Checkpoint {path}: the saved state of plugin {name} does not fit it ({type(exc).__name__}: "
                    f"{exc}). Did the plugin change since the checkpoint was written?"
                ) from exc

    def resume_position(self, num_steps: int, scores: ScoreAccumulator) -> int:
        """The step to start the epoch at: 0, or where an interrupted checkpoint of this epoch stopped."""
        resume, self._resume = self._resume, None
        if resume is None or resume["epoch"] != self.state.epoch:
            return 0
        distributed = self.state.distributed
        rank, size = (0, 1) if distributed is None else (distributed.rank, distributed.size)
        share, saved_size = rank_share(resume["scores"], rank, size)
        scores.load_state_dict(share)
        if saved_size != size and rank == 0:
            log.v3(
                f"The epoch's scores so far were summed on {saved_size} process(es) and continue on {size}: this "
                f"epoch's train scores can differ from an uninterrupted run's in the last digits (summation order)."
            )
        log.v3(f"Continuing epoch {self.state.epoch} at step {resume['next_step']} of {num_steps}.")
        return resume["next_step"]

    def inference_state(self) -> tuple[int, str | None, dict[str, Any]]:
        """(epoch, path, saved) of the checkpoint that ``load`` or ``load_epoch`` (default: the newest) names; saved's
        ``global_step`` is the step that get_model and the steps get: the stored one minus one, as in RETURNN."""
        prefix = self.config.get("model")
        found = checkpoint.list_checkpoints(prefix) if prefix else {}
        if self.config.get("load") or start_checkpoint.start_epoch_value(self.config) is not None:
            return self._returnn_inference_state(found)
        if not found and self._fresh_model_as_returnn():
            log.v2(
                f"task={self.config.get('task')!r}: no checkpoint ('model' = {prefix!r} has none, no 'load'): the model "
                f"keeps its initial parameters, epoch 1, step 0, as RETURNN's engine runs it (its _load_model)."
            )
            return 1, None, {"model": None, "epoch": 1, "global_step": 0}
        if not found:
            raise ConfigError(
                f"task={self.config.get('task')!r} needs a trained checkpoint, but 'model' = {prefix!r} "
                f"has none. Train first, or set 'model' to the checkpoint prefix."
            )
        epoch = self.config.get("load_epoch") or max(found)
        if epoch not in found:
            raise ConfigError(f"load_epoch = {epoch}, but the checkpoints of {prefix!r} are epochs {sorted(found)}.")
        saved = checkpoint.load_inference_state(found[epoch])
        # RETURNN's _load_model: outside training, get_model and the steps run at the checkpoint's step minus one
        return epoch, found[epoch], {**saved, "global_step": saved["global_step"] - 1}

    def _fresh_model_as_returnn(self) -> bool:
        """Whether a forward without any checkpoint runs a freshly built model, as RETURNN does: a RETURNN config, or
        one written for RETURNN's forward interface (forward_callback, MiniReturnn's hooks). A config for this
        framework stops instead: forwarding an untrained model is a mistake there."""
        if self.config.get("task") != "forward":
            return False
        return (
            is_returnn_config(self.config)
            or returnn_forward.fork_forward(self.config)
            or (self.config.get("forward_callback") is not None)
        )

    def _returnn_inference_state(self, found: dict[int, str]) -> tuple[int, str | None, dict[str, Any]]:
        """RETURNN's choice for eval/forward with ``load`` or ``start_epoch`` set: get_model gets the checkpoint's
        epoch and its step minus one, as RETURNN's ``_load_model`` gives them outside training."""
        epoch, path = start_checkpoint.epoch_model(self.config, found, self.config.get("task"))
        if path is None:  # RETURNN: start_epoch = 1 loads nothing; the model keeps its initial parameters
            log.v2(
                f"task={self.config.get('task')!r} with start_epoch = 1 and no 'load': no checkpoint is loaded, "
                f"the model keeps its initial parameters (as in RETURNN)."
            )
            return 1, None, {"model": None, "epoch": 1, "global_step": 0}
        parameters, stored_epoch, step = start_checkpoint.read_load(path)
        epoch = epoch or stored_epoch or 1
        return epoch, path, {"model": parameters, "epoch": epoch, "global_step": (1 if step is None else step) - 1}

    def load_for_inference(self, saved: dict[str, Any], path: str | None) -> None:
        """The parameters of checkpoint ``saved`` (read from ``path``; None: none), then ``preload_from_files``."""
        if path is not None:
            checkpoint.load_model_state(self.state.model, saved["model"], path)
        preload.preload_from_files(self.config, self.state.model, training=False)

    # ---------------------------------------------------------------------------------- saving
    def due(self, num_epochs: int) -> bool:
        """Whether this epoch writes its checkpoint: every ``save_interval`` epochs, the last epoch, and an epoch after
        which the training ends (RETURNN's rule, plus the end a plugin asks for)."""
        epoch, interval = self.state.epoch, self.config.int("save_interval")
        return epoch % interval == 0 or epoch == num_epochs or self.state.control.end_reason is not None

    def contents(self, plugins: list[Plugin]) -> dict[str, Any]:
        """Everything a resumed run needs, plugins' state included."""
        state = self.state
        model, optimizer = fsdp.full_state_dicts(state.model, state.optimizer)
        return {
            "model": model,
            "optimizer": optimizer,
            "epoch": state.epoch,
            "global_step": state.global_step,
            "rng": get_rng_state(),
            "learning_rate_control": state.lr_control.state_dict(),
            "options": resume.recorded_options(self.config),
            "plugins": {plugin.name: saved for plugin in plugins if (saved := plugin.state_dict()) is not None},
        }

    def _help_gather(self) -> None:
        """On a rank that writes no checkpoint: take part in gathering rank 0's (a collective under FSDP)."""
        if self.state.distributed is not None and self.state.distributed.fsdp is not None:
            fsdp.full_state_dicts(self.state.model, self.state.optimizer)

    def save_epoch(self, plugins: list[Plugin]) -> str | None:
        """Write the epoch's checkpoint (rank 0 only) and drop the interrupted one it supersedes; its path, or None on
        a rank that writes none."""
        prefix = self.writes()
        if not prefix:
            self._help_gather()
            return None
        path = checkpoint.checkpoint_path(prefix, self.state.epoch)
        self._lock.verify(f"writing {path}")
        checkpoint.save_checkpoint(path, self.contents(plugins))
        log.v4(f"Saved checkpoint {path}")
        checkpoint.remove_interrupted(prefix)
        return path

    def epoch_score_sums(self) -> dict[str, list[dict]]:
        """The running score sums of this epoch of every rank, in rank order: each rank's sums are its own, and a
        resumed rank continues them, so that the epoch's scores equal an uninterrupted run's bit for bit."""
        sums = {
            part: {name: to_host(value) for name, value in values.items()}
            for part, values in self.state.epoch_scores.state_dict().items()
        }
        distributed = self.state.distributed
        return {"ranks": [sums] if distributed is None else distributed.gather(sums)}

    def save_interrupted(
        self, plugins: list[Plugin], after_training: tuple[int, dict[str, Any]] | None = None
    ) -> str | None:
        """Write ``<model>.interrupted.pt``: the state after the current step, to resume mid-epoch (``after_training``:
        the number of the epoch's steps and the RNG state after them, to resume at its evaluation)."""
        scores = self.epoch_score_sums()  # a collective under torch.distributed: every rank takes part
        prefix = self.writes()
        if not prefix:
            self._help_gather()
            return None
        saved = self.contents(plugins)
        saved.update(next_step=self.state.step_in_epoch + 1, scores=scores)
        if after_training is not None:
            saved.update(next_step=after_training[0], rng=after_training[1])
        path = checkpoint.interrupted_path(prefix)
        self._lock.verify(f"writing {path}")
        checkpoint.save_checkpoint(path, saved)
        return path

    def save_mid_epoch(self, plugins: list[Plugin]) -> None:
        """``control.checkpoint``: write the mid-epoch checkpoint and go on; ``control.stop``: write it and end."""
        control = self.state.control
        if control.stop_reason is not None:
            self.stop(plugins)
        path = self.save_interrupted(plugins)
        if path:
            log.v4(f"Saved mid-epoch checkpoint {path} ({control.checkpoint_reason}).")
        control.checkpoint_reason = None

    def stop(self, plugins: list[Plugin], after_training: tuple[int, dict[str, Any]] | None = None) -> None:
        """``control.stop``: write the interrupted checkpoint and end with the command that resumes.

        ``after_training``: the stop came during the evaluation after the epoch's training, which had this many steps
        and left the RNG in this state: the checkpoint resumes there (the evaluation runs again), so nothing trained
        waits for the evaluation to end, and a SIGKILL after the grace period loses nothing trained."""
        state = self.state
        path = self.save_interrupted(plugins, after_training)
        if path:
            where = f"Wrote {path}."
        elif self.config.get("model"):  # another rank than 0: rank 0 writes the checkpoint of every rank
            where = f"Rank 0 writes the checkpoint {checkpoint.interrupted_path(self.config.get('model'))}."
        else:
            where = "No checkpoint written: set the 'model' option to be able to resume."
        rerun = f" Resume exactly from there by running the same command again:\n    {command_line()}"
        position = (
            f"during the evaluation after epoch {state.epoch}'s training"
            if after_training
            else f"after epoch {state.epoch} step {state.step_in_epoch}"
        )
        raise TrainingInterrupted(
            f"Training stopped on request ({state.control.stop_reason}) {position} (global step {state.global_step}). "
            f"{where}" + (rerun if path else "")
        )
