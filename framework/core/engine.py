"""The engine: epochs -> batches -> train_step -> loss -> backward -> optimizer step.

The loop below is all there is to training. Everything optional (clipping, schedules,
progress lines, diagnostics) is a plugin whose callbacks are bound to an ``Event``; the loop
only emits events, keeps ``self.state`` (the typed ``RunState`` callbacks read) up to date and
acts on ``state.control`` (skip an update, stop with a checkpoint, end after the epoch).
``Engine.run(task)`` runs train, eval or forward; all three go through one batch runner
(``_batches``) and emit step events, and every run ends with ``Event.CLOSE``.
"""

from __future__ import annotations

import contextlib
import os
import sys
import time
from collections.abc import Iterator
from typing import Any

import numpy as np
import torch

from framework import disk, findings, log
from framework.config import Config
from framework.core import accumulation, build
from framework.core.autocast import autocast_factory, precision_from_config, warn_if_emulated
from framework.core.events import Callbacks, Event, StopTraining
from framework.core.features import Features, Lock, OutputCollector
from framework.core.measurements import APPLIED_LEARNING_RATES
from framework.core.plugin import Plugin
from framework.core.plugins import build_plugins, prepare_config
from framework.core.run_ctx import RunCtx
from framework.core.run_findings import FINDINGS_EXIT_STATUS, RunFindings
from framework.core.run_summary import how_it_ended, summary_block
from framework.core.scores import ScoreAccumulator, Scores, format_scores, rank_share, to_host
from framework.core.state import RunState
from framework.core.step import call_step, step_function
from framework.datasets.loader import BatchLoader
from framework.errors import CheckpointError, ConfigError, FrameworkError, TrainingInterrupted
from framework.findings import Finding
from framework.rng import get_rng_state, seed_everything, set_rng_state
from framework.util import command_line


class Engine:
    """Runs a config's task: train, eval or forward."""

    def __init__(self, config: Config, callbacks: Callbacks | None, features: Features):
        """``features``: what the layers above give (``framework.run.Engine`` makes an engine with the built-in ones)."""
        self.config = config
        self.callbacks = callbacks or Callbacks()
        self.features = features
        device, distributed = build.run_device(config, features.process_group)
        self.state = RunState(
            config=config,
            task=config.get("task"),
            device=device,
            distributed=distributed,
            lr_control=features.learning_rates(config),
            learning_rate=config.float("learning_rate"),
            precision=precision_from_config(config, device),
        )
        self.findings = RunFindings(config, self.state, writes_files=distributed is None or distributed.rank == 0)
        self._resume: dict[str, Any] | None = None  # mid-epoch position from an interrupted checkpoint
        self._lock: Lock | None = None  # held while this process writes checkpoints of the model prefix
        self._plugin_states: tuple[str, dict[str, Any]] | None = None  # (checkpoint, states) to give the plugins
        self.plugins: list[Plugin] = []  # built at startup, in the order of their modules

    def run(self, task: str) -> Any:
        """Run ``task``: train, eval (returns the scores) or forward (returns the output file's path)."""
        runner = {"train": self._train, "eval": self._eval, "forward": self._forward}.get(task)
        if runner is None:
            raise ConfigError(f"task={task!r} is none of train, eval and forward.")
        self.state.task = task
        self.findings.start()
        started = time.monotonic()
        try:
            warn_if_emulated(self.state.precision)
            with self.running():
                result = runner()
            if task == "forward":  # after CLOSE
                path, collector = result
                log.v3(
                    f"Forward: wrote {len(collector.seq_indices)} sequences ({', '.join(collector.outputs)}) to {path}"
                )
                return path
            return result
        finally:
            self._summarize(sys.exc_info()[1], time.monotonic() - started)

    def exit_status(self) -> int:
        """After a run that did its work: 0, or FINDINGS_EXIT_STATUS when it reported a finding at
        ``findings_fail_level`` or above."""
        return FINDINGS_EXIT_STATUS if self.findings.failing() else 0

    def _summarize(self, ending: BaseException | None, seconds: float) -> None:
        """The run's last log lines: the summary block (after the last checkpoint line, however the run ended)."""
        self.findings.stop(did_its_work=ending is None)
        state, config = self.state, self.config
        files: dict[str, str] = {}
        prefix = config.get("model")
        if prefix and self._writes_checkpoints():
            found = self.features.list_checkpoints(prefix)
            interrupted = self.features.interrupted_path(prefix)
            newest = [found[max(found)]] if found else []
            newest += [interrupted] if os.path.exists(interrupted) else []
            files["checkpoints"] = ", ".join(newest) + f" ({len(found)} epoch checkpoint(s))" if newest else "none"
        logs = config.get("log")
        if logs:
            files["log"] = ", ".join([logs] if isinstance(logs, str) else logs)
        if self.findings.path is not None:
            directory = os.path.dirname(self.findings.path)
            files["findings file"] = self.findings.path
            files["report"] = (
                f"{os.path.join(directory, 'report.html')} (written by: python -m framework report {directory})"
            )
        failing = self.findings.failing()
        fail_note = (
            f"findings_fail_level = {self.findings.fail_level!r}: {len(failing)} finding(s) at that severity or above, "
            f"so the exit status is {FINDINGS_EXIT_STATUS}"
            if failing and ending is None
            else ""
        )
        log.v3(
            summary_block(
                task=state.task,
                ended=how_it_ended(state.outcome, ending),
                epoch=state.epoch,
                num_epochs=config.int("num_epochs") if state.task == "train" else None,
                global_step=state.global_step,
                seconds=seconds,
                scores=state.lr_control.scores if state.task == "train" else {state.epoch: state.eval_scores},
                found=self.findings.found,
                files=files,
                fail_note=fail_note,
            )
        )

    @contextlib.contextmanager
    def running(self) -> Iterator[RunState]:
        """Around a task: EXCEPTION callbacks see an exception (it propagates unchanged), CLOSE always runs."""
        state = self.state
        try:
            yield state
            state.outcome = state.outcome or "completed"
        except (TrainingInterrupted, KeyboardInterrupt):
            state.outcome = "interrupted"
            raise
        except Exception as exc:
            state.outcome, state.exception = "exception", exc
            if isinstance(exc, FrameworkError) and exc.step:  # the step a verdict read a step later is about
                for name, value in exc.step.items():
                    setattr(state, name, value)
            self.callbacks.emit(Event.EXCEPTION, state)
            raise
        except BaseException:  # a terminating signal (exit_log.Terminated), SystemExit
            state.outcome = "interrupted"
            raise
        finally:
            try:
                self._close(state)
            finally:
                if self._lock is not None:
                    self._lock.release()
                if state.distributed is not None:
                    state.distributed.close()

    def _close(self, state: RunState) -> None:
        """Every CLOSE callback runs, also after one raised; the run's own error stays the one reported."""
        raised = self.callbacks.emit_each(Event.CLOSE, state)
        self._apply_changes()  # what plugins let go of at CLOSE (e.g. their summary sink) leaves the state too
        propagating = sys.exc_info()[1]  # the run's own error or interruption, on its way out
        for exc in raised[0 if propagating is not None else 1 :]:
            findings.report(
                Finding(
                    "error",
                    "run close",
                    f"a callback raised while closing the run (after {state.outcome}): {type(exc).__name__}: {exc}",
                    evidence={"outcome": state.outcome},
                )
            )
        if raised and propagating is None:
            raise raised[0]

    # ------------------------------------------------------------------------------- training
    def _train(self) -> None:
        """task=train: ``num_epochs``, resuming from the newest checkpoint of ``model`` if there is one."""
        if not self.init_train():
            return
        try:
            self._train_epochs(self.config.int("num_epochs"))  # after init_train: a verdict run sets its own
        except StopTraining as stop:
            self.state.outcome = "stopped"
            log.v3(f"Training ended: {stop}")
        self.callbacks.emit(Event.FINISH, self.state)

    def _train_epochs(self, num_epochs: int) -> None:
        """Epochs after the current one up to ``num_epochs``: train, evaluate, let plugins judge, checkpoint."""
        state = self.state
        for epoch in range(state.epoch + 1, num_epochs + 1):
            if state.control.end_reason is not None:
                log.v3(f"Training ended after epoch {state.epoch}: {state.control.end_reason}")
                return
            state.epoch = epoch
            self._set_learning_rate(state.lr_control.learning_rate(epoch))
            start = time.perf_counter()
            train_scores = self.train_epoch()
            trained = (state.steps_in_epoch, get_rng_state())  # where a stop during evaluation resumes
            log.v3(
                f"Epoch {epoch} train: {format_scores(train_scores)}, {state.steps_in_epoch} steps, "
                f"{time.perf_counter() - start:.1f} sec, lr {applied_text(state.store.get(APPLIED_LEARNING_RATES, {}).get(epoch), state.learning_rate)}"
            )
            try:
                eval_scores = self.evaluate_all([d for d in state.loaders if d != "train"])
            except _StoppedDuringEvaluation:
                self._stop_with_checkpoint(after_training=trained)
            if eval_scores:
                log.v3(f"Epoch {epoch} evaluation: {format_dataset_scores(eval_scores)}")
            state.lr_control.record(epoch, {"train": train_scores, **eval_scores})
            self.callbacks.emit(Event.EPOCH_END, state)
            if self._checkpoint_due(num_epochs):
                self._save_checkpoint()

    def init_train(self) -> bool:
        """Datasets, model, optimizer and plugins, fresh or resumed, then STARTUP; False if training is done."""
        prepare_config(self.config, "train", self.features.plugin_classes())
        self._lock_model_prefix()
        self.init_data(["train", "dev", "eval"], required="train")
        if not self._init_model_for_training(self.config.int("num_epochs")):
            return False
        self.state.optimizer.zero_grad(set_to_none=True)
        self._start_plugins()
        return True

    def explain_plugins(self) -> str:
        """The plugins the config turns on for its task and the resolved order of their callbacks.

        Builds the datasets, a fresh model and the plugins (nothing is loaded, trained or written), then
        closes them as a run would.
        """
        state = self.state
        with self.running():
            prepare_config(self.config, state.task, self.features.plugin_classes())
            self.init_data(["train", "dev", "eval"], required=None)
            seed_everything(self.config.int("random_seed"))
            self.build_model(epoch=1, step=0)
            state.optimizer = (
                self.features.create_optimizer(self.config, state.model) if state.task == "train" else None
            )
            state.step_model = state.model
            self.plugins = build_plugins(self.config, state, self.callbacks, self.features.plugin_classes())
        names = ", ".join(plugin.name for plugin in self.plugins)
        shared = [f"  {line}" for line in state.store.explain()] or ["  (none)"]
        return "\n".join(
            [f"Plugins of task {state.task}: {names}", self.callbacks.explain(), "Shared measurements:", *shared]
        )

    def _start_plugins(self) -> None:
        """Build the plugins the config turns on (their order resolved), give them their saved state, then STARTUP."""
        self.plugins = build_plugins(self.config, self.state, self.callbacks, self.features.plugin_classes())
        self._load_plugin_states()
        self.callbacks.emit(Event.STARTUP, self.state)
        self._apply_changes()

    def _load_plugin_states(self) -> None:
        """Give each plugin the state it saved in the checkpoint this run resumes from (before STARTUP, which
        starts from it); a plugin the checkpoint has nothing for (off then, or an older checkpoint) starts fresh."""
        if self._plugin_states is None:
            return
        (path, saved), self._plugin_states = self._plugin_states, None
        built = {plugin.name: plugin for plugin in self.plugins}
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

    def _apply_changes(self) -> None:
        """Apply what plugins asked to change through ``state.control`` (only the engine writes its state)."""
        for name, value in self.state.control.changes.items():
            if name == "loaders":
                self.state.loaders.update(value)
            elif name == "learning_rates":
                self.state.lr_control.continue_from(*value)
            else:
                setattr(self.state, name, value)
        self.state.control.changes.clear()

    def _lock_model_prefix(self) -> None:
        """Before anything is loaded: the model directory is writable and no other run writes this prefix."""
        prefix = self._writes_checkpoints()
        if prefix:
            disk.probe_directory(os.path.dirname(prefix), "model directory", "model")
            self._lock = self.features.lock(prefix)
            self._lock.acquire()
        log.release_file_writes()  # the log files are this run's now (rnn.py held their lines back until here)

    def train_epoch(self) -> dict[str, float]:
        """One pass over the train dataset's batches of ``state.epoch``; returns the train scores."""
        state, control, emit = self.state, self.state.control, self.callbacks.emit
        loader = state.loaders["train"]
        plan = loader.plan(state.epoch)
        if state.distributed is not None:
            plan = state.distributed.train_plan(plan)
        shares = accumulation.sequence_shares(plan, self.config.int("accum_grad_multiple_step"))
        scores = state.epoch_scores = ScoreAccumulator()
        start = self._resume_position(len(plan), scores)
        state.dataset, state.steps_in_epoch = "train", len(plan)
        train_step = step_function(self.config, "train")
        state.model.train()
        clock, now = state.step_clock, time.perf_counter  # marks taken here: a callback per mark costs more
        emit(Event.EPOCH_START, state)
        for i, indices, run_ctx in self._batches("train", loader, plan, start):
            clock[0] = now()
            emit(Event.STEP_START, state)
            if control.changes:
                self._apply_changes()
            clock[1] = now()
            call_step(train_step, state.step_model, run_ctx)
            clock[2] = now()
            emit(Event.AFTER_FORWARD, state)
            loss = accumulation.accumulated_loss(run_ctx, shares[i] if shares else None)
            (loss if state.loss_scale is None else loss * state.loss_scale).backward()
            clock[3] = now()
            emit(Event.AFTER_BACKWARD, state)
            scores.add(run_ctx, len(indices))
            boundary = state.at_update_boundary()
            if boundary:
                emit(Event.BEFORE_OPTIMIZER_STEP, state)
                if not control.update_skipped:
                    self.features.step_unless(state.optimizer, control.skip_flag)
                control.update_done()
                state.optimizer.zero_grad(set_to_none=True)
                emit(Event.AFTER_OPTIMIZER_STEP, state)
            state.global_step += 1
            emit(Event.STEP_END, state)
            if control.checkpoint_asked and boundary:
                self._checkpoint_mid_epoch()
        if not plan:
            raise ConfigError(
                f"The train dataset ({loader.dataset.name}, {loader.dataset.num_seqs} sequences) delivered no batches "
                f"in epoch {state.epoch}, so there is nothing to train on. Check what the 'train' option reads (its "
                f"files, num_seqs, a partition_epoch larger than the data); framework-dump-dataset your_config.py "
                f"shows what it delivers."
            )
        return scores.result(self._total)

    def _checkpoint_mid_epoch(self) -> None:
        """``control.checkpoint``: write the mid-epoch checkpoint and go on; ``control.stop``: write it and end."""
        control = self.state.control
        if control.stop_reason is not None:
            self._stop_with_checkpoint()
        path = self.save_interrupted_checkpoint()
        if path:
            log.v4(f"Saved mid-epoch checkpoint {path} ({control.checkpoint_reason}).")
        control.checkpoint_reason = None

    def _stop_with_checkpoint(self, after_training: tuple[int, dict[str, Any]] | None = None) -> None:
        """``control.stop``: write the interrupted checkpoint and end with the command that resumes.

        ``after_training``: the stop came during the evaluation after the epoch's training, which had this many steps
        and left the RNG in this state: the checkpoint resumes there (the evaluation runs again), so nothing trained
        waits for the evaluation to end, and a SIGKILL after the grace period loses nothing trained."""
        state = self.state
        path = self.save_interrupted_checkpoint(after_training)
        if path:
            where = f"Wrote {path}."
        elif self.config.get("model"):  # another rank than 0: rank 0 writes the checkpoint of every rank
            where = f"Rank 0 writes the checkpoint {self.features.interrupted_path(self.config.get('model'))}."
        else:
            where = "No checkpoint written: set the 'model' option to be able to resume."
        resume = f" Resume exactly from there by running the same command again:\n    {command_line()}"
        position = (
            f"during the evaluation after epoch {state.epoch}'s training"
            if after_training
            else f"after epoch {state.epoch} step {state.step_in_epoch}"
        )
        raise TrainingInterrupted(
            f"Training stopped on request ({state.control.stop_reason}) {position} (global step {state.global_step}). "
            f"{where}" + (resume if path else "")
        )

    # ----------------------------------------------------------------------------- evaluation
    def evaluate_all(self, datasets: list[str]) -> Scores:
        """Scores of every dataset in ``datasets``."""
        return {dataset: self.evaluate(dataset) for dataset in datasets}

    def evaluate(self, dataset: str) -> dict[str, float]:
        """Scores of ``train_step``'s losses over ``dataset`` (dev, eval, ...), without updates."""
        state, emit = self.state, self.callbacks.emit
        loader = state.loaders[dataset]
        scores = ScoreAccumulator()
        state.model.eval()
        plan = loader.plan(max(state.epoch, 1))
        shard = state.distributed is not None and state.distributed.shards_eval(len(plan))
        if shard:
            plan = state.distributed.eval_plan(plan)
        train_step = step_function(self.config, "eval")
        state.dataset, state.steps_in_epoch = dataset, len(plan)
        emit(Event.EVAL_START, state)
        # A stop asked while a training evaluates ends the evaluation (one process: ranks agree on stops at updates).
        control = state.control if state.task == "train" and state.distributed is None else None
        with torch.no_grad():
            for _, indices, run_ctx in self._batches("eval", loader, plan):
                emit(Event.EVAL_STEP_START, state)
                call_step(train_step, state.model, run_ctx)
                emit(Event.EVAL_STEP_END, state)
                scores.add(run_ctx, len(indices))
                if control is not None and control.stop_reason is not None:
                    raise _StoppedDuringEvaluation
        state.eval_scores[dataset] = result = scores.result(self._total if shard else None)
        emit(Event.EVAL_END, state)
        return result

    def _batches(
        self, stage: str, loader: BatchLoader, plan: list[np.ndarray], start: int = 0
    ) -> Iterator[tuple[int, np.ndarray, RunCtx]]:
        """The batch runner of train, eval and forward: ``(step_in_epoch, indices, run_ctx)`` per batch of ``plan``
        from ``start`` on, with the step fields of ``state`` set for it; they are cleared after the last."""
        state = self.state
        for i, (indices, batch) in enumerate(loader.iterate(plan[start:] if start else plan), start=start):
            run_ctx = self._run_ctx(stage, batch)
            state.step_in_epoch, state.batch_indices, state.batch, state.run_ctx = i, indices, batch, run_ctx
            yield i, indices, run_ctx
        state.batch = state.batch_indices = state.run_ctx = None

    def _run_ctx(self, stage: str, batch: dict[str, torch.Tensor]) -> RunCtx:
        """The run context of one step of ``stage``: its place in the run, the summary sink, the autocast."""
        state = self.state
        return RunCtx(
            stage=stage,
            epoch=state.epoch,
            step=state.global_step,
            batch=batch,
            summaries=state.summaries,
            autocast=autocast_factory(state.precision),
        )

    @property
    def _total(self):
        """Sums over all processes (None: a single process)."""
        return self.state.distributed.sum if self.state.distributed is not None else None

    def _eval(self) -> Scores:
        """task=eval: score the dev/eval datasets with a checkpoint."""
        self.init_data(["dev", "eval"], required=None)
        if not self.state.loaders:
            raise ConfigError("task='eval' needs a 'dev' or 'eval' dataset (or 'eval_datasets').")
        self.load_for_inference()
        step_function(self.config, "eval")  # a missing train_step is a config error before anything runs
        self._start_plugins()
        results = self.evaluate_all(list(self.state.loaders))
        log.v3(f"Evaluation of epoch {self.state.epoch}: {format_dataset_scores(results)}")
        self.callbacks.emit(Event.FINISH, self.state)
        return results

    def _forward(self) -> tuple[str, OutputCollector]:
        """task=forward: ``forward_step`` over the ``forward_data`` dataset; its marked outputs go to one file."""
        state, emit = self.state, self.callbacks.emit
        forward_step = step_function(self.config, "forward")  # a config error before anything is loaded
        dataset, state.extern_data, loader = build.init_forward_data(self.config, state.device)
        self.load_for_inference()
        path = self.features.output_path(self.config, state.epoch)
        collector = self.features.output_collector(self.config, dataset, state.model)
        self._start_plugins()
        state.model.eval()
        plan = loader.plan(1)
        state.dataset, state.steps_in_epoch = loader.option, len(plan)
        with torch.no_grad():
            for _, indices, run_ctx in self._batches("forward", loader, plan):
                emit(Event.FORWARD_STEP_START, state)
                call_step(forward_step, state.model, run_ctx)
                emit(Event.FORWARD_STEP_END, state)
                collector.add(indices, run_ctx.outputs)
        emit(Event.FINISH, state)
        collector.write(path, self.features.sequence_tags(dataset, collector.seq_indices))
        return path, collector

    # ---------------------------------------------------------------------------------- setup
    def init_data(self, options: list[str], required: str | None) -> None:
        """Build the datasets of ``options`` plus ``eval_datasets`` and their batch loaders."""
        self.state.extern_data, self.state.loaders = build.init_data(self.config, options, required, self.state.device)

    def build_model(self, epoch: int, step: int) -> None:
        """Call the config's ``get_model`` and move the model to the device."""
        self.state.model = build.build_model(
            self.config, self.state.device, epoch, step, self.features.watch_model_build
        )

    def _init_model_for_training(self, num_epochs: int) -> bool:
        """Build model and optimizer, fresh or from the newest checkpoint; False if already done."""
        state = self.state
        step_function(self.config, "train")  # a missing train_step is a config error before anything is built
        prefix = self.config.get("model")
        path, saved = self._newest_training_state(prefix) if prefix else (None, None)
        if saved is not None and saved["epoch"] >= num_epochs and "next_step" not in saved:
            log.v3(
                f"Training is complete: {path} is epoch {saved['epoch']} of {num_epochs}. To train further, "
                f"raise num_epochs (++num_epochs {num_epochs + 5}); to start fresh, delete the checkpoints "
                f"{prefix}.*.pt or write elsewhere with ++output_dir (the shipped configs) or ++model."
            )
            return False
        seed_everything(self.config.int("random_seed"))
        # An interrupted checkpoint is mid-epoch: that epoch is continued, not skipped.
        next_epoch = 1 if saved is None else saved["epoch"] + ("next_step" not in saved)
        self.build_model(epoch=next_epoch, step=0 if saved is None else saved["global_step"])
        state.step_model = (
            state.model if state.distributed is None else state.distributed.prepare(state.model, self.callbacks)
        )
        # After prepare: FSDP replaces the parameters by their shards, which the optimizer must hold.
        state.optimizer = self.features.create_optimizer(self.config, state.model)
        if self._writes_checkpoints():
            self.features.check_room(prefix, state.model, state.optimizer)
        if saved is None and self.config.get("import_model_train_epoch1"):
            imported = self.config.get("import_model_train_epoch1")
            self.features.load_model_state(state.model, self.features.load_checkpoint(imported)["model"], imported)
            log.v3(f"Training starts from the parameters of {imported} (import_model_train_epoch1).")
        if saved is None:
            self.features.preload_from_files(self.config, state.model, training=True)
        if saved is not None:
            self._restore(saved, path)
            log.v3(f"Resuming from {path}: epoch {state.epoch}, global step {state.global_step}.")
            self.features.report_changes(self.config, saved, state.lr_control, next_epoch)
            state.epoch = next_epoch - 1
            if "next_step" in saved:
                self._resume = {"epoch": saved["epoch"], "next_step": saved["next_step"], "scores": saved["scores"]}
        return True

    def _resume_position(self, num_steps: int, scores: ScoreAccumulator) -> int:
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

    def _newest_training_state(self, prefix: str) -> tuple[str | None, dict[str, Any] | None]:
        """The newest epoch checkpoint, or an interrupted (mid-epoch) one if that is newer."""
        writes = self._writes_checkpoints()
        if writes:
            self.features.remove_stale_temp_files(prefix)
        found = self.features.list_checkpoints(prefix)
        path = found[max(found)] if found else None
        interrupted = self.features.interrupted_path(prefix)
        if os.path.exists(interrupted):
            saved = self.features.load_training_state(interrupted)
            if saved["epoch"] > (max(found) if found else 0):
                return interrupted, saved
            # An epoch checkpoint covers it. Other ranks may be reading it now: there, the next epoch's write removes it.
            if writes and self.state.distributed is None:
                self.features.remove_interrupted(prefix)
        return path, self.features.load_training_state(path) if path else None

    def _restore(self, saved: dict[str, Any], path: str) -> None:
        """Model, optimizer, learning-rate control, position and RNG from checkpoint ``saved`` (read from ``path``)."""
        state = self.state
        self.features.load_model_state(state.model, saved["model"], path)
        try:
            self.features.load_optimizer_state(state.optimizer, saved["optimizer"])
        except (ValueError, KeyError) as exc:
            raise CheckpointError(
                f"Checkpoint {path}: the optimizer state does not fit the configured optimizer "
                f"({exc}). Did 'optimizer' change since it was written?"
            ) from None
        state.lr_control.load_state_dict(saved["learning_rate_control"])
        state.epoch, state.global_step = saved["epoch"], saved["global_step"]
        set_rng_state(saved["rng"])
        # The plugins are built later (_start_plugins); a checkpoint older than plugin states has none.
        self._plugin_states = (path, saved.get("plugins", {}))

    def load_for_inference(self) -> None:
        """Build the model and load the checkpoint that ``load_epoch`` (default: newest) names."""
        prefix = self.config.get("model")
        found = self.features.list_checkpoints(prefix) if prefix else {}
        if not found:
            raise ConfigError(
                f"task={self.config.get('task')!r} needs a trained checkpoint, but 'model' = {prefix!r} "
                f"has none. Train first, or set 'model' to the checkpoint prefix."
            )
        epoch = self.config.get("load_epoch") or max(found)
        if epoch not in found:
            raise ConfigError(f"load_epoch = {epoch}, but the checkpoints of {prefix!r} are epochs {sorted(found)}.")
        saved = self.features.load_inference_state(found[epoch])
        seed_everything(self.config.int("random_seed"))
        self.build_model(epoch=epoch, step=saved["global_step"])
        self.features.load_model_state(self.state.model, saved["model"], found[epoch])
        self.features.preload_from_files(self.config, self.state.model, training=False)
        self.state.epoch, self.state.global_step = saved["epoch"], saved["global_step"]
        log.v4(f"Loaded {found[epoch]}")

    def _set_learning_rate(self, lr: float) -> None:
        """The epoch's scheduled rate, into every param group (per-step schedules adjust it from there)."""
        self.state.learning_rate = lr
        for group in self.state.optimizer.param_groups:
            group["lr"] = lr

    def _checkpoint_state(self) -> dict[str, Any]:
        """Everything a resumed run needs, plugins' state included."""
        state = self.state
        model, optimizer = self.features.full_state_dicts(state.model, state.optimizer)
        return {
            "model": model,
            "optimizer": optimizer,
            "epoch": state.epoch,
            "global_step": state.global_step,
            "rng": get_rng_state(),
            "learning_rate_control": state.lr_control.state_dict(),
            "options": self.features.recorded_options(self.config),
            "plugins": {plugin.name: saved for plugin in self.plugins if (saved := plugin.state_dict()) is not None},
        }

    def _writes_checkpoints(self) -> str | None:
        """The checkpoint prefix if this process writes checkpoints (rank 0 of a distributed run)."""
        distributed = self.state.distributed
        return self.config.get("model") if distributed is None or distributed.rank == 0 else None

    def _help_gather(self) -> None:
        """On a rank that writes no checkpoint: take part in gathering rank 0's (a collective under FSDP)."""
        if self.state.distributed is not None and self.state.distributed.fsdp is not None:
            self.features.full_state_dicts(self.state.model, self.state.optimizer)

    def _checkpoint_due(self, num_epochs: int) -> bool:
        """Whether this epoch writes its checkpoint: every ``save_interval`` epochs, the last epoch, and an epoch after
        which the training ends (RETURNN's rule, plus the end a plugin asks for)."""
        epoch, interval = self.state.epoch, self.config.int("save_interval")
        return epoch % interval == 0 or epoch == num_epochs or self.state.control.end_reason is not None

    def _save_checkpoint(self) -> None:
        """Write the epoch's checkpoint (rank 0 only) and drop the interrupted one it supersedes."""
        prefix = self._writes_checkpoints()
        if not prefix:
            self._help_gather()
            return
        path = self.features.checkpoint_path(prefix, self.state.epoch)
        self._lock.verify(f"writing {path}")
        self.features.save_checkpoint(path, self._checkpoint_state())
        log.v4(f"Saved checkpoint {path}")
        self.features.remove_interrupted(prefix)
        self.callbacks.emit(Event.CHECKPOINT_SAVED, self.state)

    def _epoch_score_sums(self) -> dict[str, list[dict]]:
        """The running score sums of this epoch of every rank, in rank order: each rank's sums are its own, and a
        resumed rank continues them, so that the epoch's scores equal an uninterrupted run's bit for bit."""
        sums = {
            part: {name: to_host(value) for name, value in values.items()}
            for part, values in self.state.epoch_scores.state_dict().items()
        }
        distributed = self.state.distributed
        return {"ranks": [sums] if distributed is None else distributed.gather(sums)}

    def save_interrupted_checkpoint(self, after_training: tuple[int, dict[str, Any]] | None = None) -> str | None:
        """Write ``<model>.interrupted.pt``: the state after the current step, to resume mid-epoch (``after_training``:
        the number of the epoch's steps and the RNG state after them, to resume at its evaluation)."""
        scores = self._epoch_score_sums()  # a collective under torch.distributed: every rank takes part
        prefix = self._writes_checkpoints()
        if not prefix:
            self._help_gather()
            return None
        saved = self._checkpoint_state()
        saved.update(next_step=self.state.step_in_epoch + 1, scores=scores)
        if after_training is not None:
            saved.update(next_step=after_training[0], rng=after_training[1])
        path = self.features.interrupted_path(prefix)
        self._lock.verify(f"writing {path}")
        self.features.save_checkpoint(path, saved)
        return path


class _StoppedDuringEvaluation(Exception):
    """A stop was asked while a training evaluated: the training loop writes its checkpoint and ends."""


def format_dataset_scores(scores: Scores) -> str:
    """``dev: ce 0.699 fer 0.508 dev_other: ce 0.8 ...``."""
    return " ".join(f"{dataset}: {format_scores(values)}" for dataset, values in scores.items())


def applied_text(record: list[float] | None, scheduled: float) -> str:
    """The rate applied in an epoch, for its epoch line: ``0.001``; ``5e-05 -> 0.005`` when it changed
    (``(max 0.01)`` when it went beyond both ends); ``(learning_rate 0.001)`` when the epoch's scheduled
    rate is outside what was applied (a per-step schedule that keeps it elsewhere). ``record``: the epoch's
    [first, lowest, highest, latest] applied rate (``APPLIED_LEARNING_RATES``), None: not recorded."""
    if record is None:
        return f"{scheduled:g}"
    first, low, high, last = record
    text = f"{first:g}" if low == high else f"{first:g} -> {last:g}"
    if low < min(first, last):
        text += f" (min {low:g})"
    if high > max(first, last):
        text += f" (max {high:g})"
    if not low * (1 - 1e-6) <= scheduled <= high * (1 + 1e-6):
        text += f" (learning_rate {scheduled:g})"
    return text
