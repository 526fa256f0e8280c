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
import sys
import time
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import torch

from framework.base import findings, log
from framework.base.config import Config
from framework.base.errors import ConfigError, FrameworkError, TrainingInterrupted
from framework.base.findings import Finding
from framework.base.options import register
from framework.base.returnn_options import is_returnn_config
from framework.base.rng import get_rng_state, seed_everything
from framework.check_library.freezes import record_freezes
from framework.check_library.state_loads import record_loads
from framework.core import accumulation, build
from framework.core.autocast import autocast_factory, precision_from_config, warn_if_emulated
from framework.core.events import Callbacks, Event, StopTraining
from framework.core.measurements import APPLIED_LEARNING_RATES
from framework.core.plugin import Plugin
from framework.core.run_ctx import RunCtx
from framework.core.run_failure import report_failure
from framework.core.run_findings import FINDINGS_EXIT_STATUS, RunFindings
from framework.core.run_plugins import build_plugins, prepare_config
from framework.core.run_summary import run_summary
from framework.core.scores import ScoreAccumulator, Scores, format_scores
from framework.core.state import RunState
from framework.core.step import call_step, step_function
from framework.datasets.loader import BatchLoader
from framework.training import forward, optim, returnn_forward, start_checkpoint
from framework.training.distributed import Distributed
from framework.training.lr_control import LearningRateControl
from framework.training.optimizer_set import OptimizerSet, create_optimizers, declares_several, optimizer_names
from framework.training.run_checkpoints import RunCheckpoints

register(
    "device",
    "str",
    "auto",
    "Device to run on: auto (cuda if available, else cpu), cpu, cuda, cuda:N, mps, or gpu (RETURNN's value: the "
    "machine's accelerator, an error without one).",
    __name__,
)
register(
    "get_model", "callable | None", None, "get_model(*, epoch, step, **kwargs) -> nn.Module builds the model.", __name__
)
register(
    "train_step",
    "callable | None",
    None,
    "train_step(*, model, extern_data, run_ctx, **kwargs): computes losses via run_ctx.mark_as_loss.",
    __name__,
)
register(
    "forward_step",
    "callable | None",
    None,
    "forward_step(*, model, extern_data, run_ctx, **kwargs): marks outputs via run_ctx.mark_as_output.",
    __name__,
)
register("num_epochs", "int", 1, "Number of (sub-)epochs to train.", __name__, range="[1, inf)")
register(
    "accum_grad_multiple_step",
    "int",
    1,
    "Accumulate gradients over this many batches per update; equivalent to a batch that many times larger. In a "
    "RETURNN config (backend or behavior_version set) each batch's loss counts as it is, as in RETURNN's torch "
    "engine: a mean loss adds up the batches' means, and an epoch's last partial window is no update. As in RETURNN, "
    "also a function called after each step (epoch, epoch_continuous, global_train_step) for the window's size.",
    __name__,
    range="[1, inf)",
)
register(
    "random_seed",
    "int",
    42,
    "Seed for torch, numpy, random and dataset shuffling. A RETURNN config's datasets shuffle as RETURNN's do, seeded "
    "by the epoch and random_seed_offset, not by random_seed.",
    __name__,
    range="[0, 4294967295]",
)
register(
    "eval_datasets",
    "dict | None",
    None,
    "Extra evaluation datasets: {name: dataset spec}, scored after each epoch.",
    __name__,
)
register(
    "callbacks",
    "dict",
    {},
    "Your own callbacks: {event: fn(state) or [fns]}, events as in framework.core.events.Event (e.g. 'epoch_end', 'close').",
    __name__,
)
register(
    "plugins",
    "list",
    [],
    "Your own diagnostics: module names (each with PLUGINS = (...)) or Plugin classes; see docs/writing_a_diagnostic.rst.",
    __name__,
)


@contextlib.contextmanager
def _watch_get_model() -> Iterator[None]:
    """What the checks learn while ``get_model`` runs: who froze which parameter, and what non-strict loads loaded."""
    with record_freezes(), record_loads():
        yield


class Engine:
    """Runs a config's task: train, eval or forward."""

    def __init__(
        self,
        config: Config,
        callbacks: Callbacks | None = None,
        plugin_classes: Callable[[], list[type[Plugin]]] = list,
    ):
        """``plugin_classes``: the built-in plugin classes, asked for when the plugins are built (``framework.assembly.Engine``
        gives them; the config adds its own)."""
        self.config = config
        self.callbacks = callbacks or Callbacks()
        self.plugin_classes = plugin_classes
        device, distributed = build.run_device(config, Distributed)
        self.state = RunState(
            config=config,
            task=config.get("task"),
            device=device,
            distributed=distributed,
            lr_control=LearningRateControl(config),
            learning_rate=config.float("learning_rate"),
            precision=precision_from_config(config, device),
        )
        self.findings = RunFindings(config, self.state, writes_files=distributed is None or distributed.rank == 0)
        self.checkpoints = RunCheckpoints(config, self.state)
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
                    f"Forward: wrote {len(collector.seq_indices)} sequences "
                    f"({', '.join(collector.outputs) or 'no outputs'}) to {path}"
                )
                return path
            return result
        finally:
            self.findings.stop(did_its_work=sys.exc_info()[1] is None)
            log.v3(
                run_summary(
                    self.state, self.findings, self.checkpoints.listing(), sys.exc_info()[1], time.monotonic() - started
                )
            )

    def exit_status(self) -> int:
        """After a run that did its work: 0, or FINDINGS_EXIT_STATUS when it reported a finding at
        ``findings_fail_level`` or above."""
        return FINDINGS_EXIT_STATUS if self.findings.failing() else 0

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
            report_failure(self.config, state, exc)
            raise
        except BaseException:  # a terminating signal (exit_log.Terminated), SystemExit
            state.outcome = "interrupted"
            raise
        finally:
            try:
                self._close(state)
            finally:
                self.checkpoints.release()
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
                    evidence={"outcome": state.outcome, "exception": f"{type(exc).__name__}: {exc}"},
                    where=_raised_at(exc),
                    fix="Fix the callback's error (its traceback is in the log); the run's checkpoints are kept.",
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
                self.checkpoints.stop(self.plugins, after_training=trained)
            del trained  # its RNG state tensors are no tensors of the training (the leak check counts live tensors)
            if eval_scores:
                log.v3(f"Epoch {epoch} evaluation: {format_dataset_scores(eval_scores)}")
            state.lr_control.record(epoch, {"train": train_scores, **eval_scores})
            self.callbacks.emit(Event.EPOCH_END, state)
            if self.checkpoints.due(num_epochs) and self.checkpoints.save_epoch(self.plugins):
                self.callbacks.emit(Event.CHECKPOINT_SAVED, state)

    def init_train(self) -> bool:
        """Datasets, model, optimizer and plugins, fresh or resumed, then STARTUP; False if training is done."""
        prepare_config(self.config, "train", self.plugin_classes())
        self.checkpoints.lock_prefix()
        log.release_file_writes()  # the log files are this run's now (rnn.py held their lines back until here)
        self.init_data(["train", "dev", "eval"], required="train")
        if not self._init_model_for_training(self.config.int("num_epochs")):
            return False
        self._start_plugins()
        return True

    def explain_plugins(self) -> str:
        """The plugins the config turns on for its task and the resolved order of their callbacks.

        Builds the datasets, a fresh model and the plugins (nothing is loaded, trained or written), then
        closes them as a run would.
        """
        state = self.state
        with self.running():
            prepare_config(self.config, state.task, self.plugin_classes())
            self.init_data(["train", "dev", "eval"], required=None)
            seed_everything(self.config.int("random_seed"))
            self.build_model(epoch=1, step=0)
            state.optimizer = create_optimizers(self.config, state.model) if state.task == "train" else None
            state.step_model = state.model
            self.plugins = build_plugins(self.config, state, self.callbacks, self.plugin_classes())
        names = ", ".join(plugin.name for plugin in self.plugins)
        shared = [f"  {line}" for line in state.store.explain()] or ["  (none)"]
        return "\n".join(
            [f"Plugins of task {state.task}: {names}", self.callbacks.explain(), "Shared measurements:", *shared]
        )

    def _start_plugins(self) -> None:
        """Build the plugins the config turns on (their order resolved), give them their saved state, then STARTUP."""
        self.plugins = build_plugins(self.config, self.state, self.callbacks, self.plugin_classes())
        self.checkpoints.load_plugin_states(self.plugins)
        self.callbacks.emit(Event.STARTUP, self.state)
        self._apply_changes()

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

    def train_epoch(self) -> dict[str, float]:
        """One pass over the train dataset's batches of ``state.epoch``; returns the train scores."""
        state, control, emit = self.state, self.state.control, self.callbacks.emit
        loader = state.loaders["train"]
        plan = loader.plan(state.epoch)
        if state.distributed is not None:
            plan = state.distributed.train_plan(plan)
        shares = accumulation.sequence_shares(plan, self.config.int("accum_grad_multiple_step"))
        scores = state.epoch_scores = ScoreAccumulator()
        start = self.checkpoints.resume_position(len(plan), scores)
        if start == 0:  # a RETURNN config's last partial window of the epoch before: RETURNN drops its gradients
            state.optimizer.zero_grad(set_to_none=True)
        state.dataset, state.steps_in_epoch = "train", len(plan)
        train_step = step_function(self.config, "train")
        several = state.optimizer if isinstance(state.optimizer, OptimizerSet) else None
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
            if several is None:
                loss = accumulation.accumulated_loss(run_ctx, shares[i] if shares else None)
                (loss if state.loss_scale is None else loss * state.loss_scale).backward()
            else:  # each optimizer's losses reach its parameters only
                several.backward(
                    run_ctx, accumulation.weights(run_ctx, shares[i] if shares else None), state.loss_scale
                )
            clock[3] = now()
            emit(Event.AFTER_BACKWARD, state)
            scores.add(run_ctx, len(indices))
            boundary = state.at_update_boundary()
            if boundary:
                emit(Event.BEFORE_OPTIMIZER_STEP, state)
                if not control.update_skipped:
                    optim.step_unless(state.optimizer, control.skip_flag, control.optimizer_skip_flags)
                control.update_done()
                state.optimizer.zero_grad(set_to_none=True)
                emit(Event.AFTER_OPTIMIZER_STEP, state)
            state.global_step += 1
            emit(Event.STEP_END, state)
            if control.checkpoint_asked and boundary:
                self.checkpoints.save_mid_epoch(self.plugins)
        if not plan:
            raise ConfigError(
                f"The train dataset ({loader.dataset.name}, {loader.dataset.num_seqs} sequences) delivered no batches "
                f"in epoch {state.epoch}, so there is nothing to train on. Check what the 'train' option reads (its "
                f"files, num_seqs, a partition_epoch larger than the data); framework-dump-dataset your_config.py "
                f"shows what it delivers."
            )
        return scores.result(self._total)

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
            optimizers=optimizer_names(state.optimizer),
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

    def _forward(self) -> tuple[str, forward.OutputCollector]:
        """task=forward: ``forward_step`` over the ``forward_data`` dataset; its marked outputs go to one file."""
        state, emit = self.state, self.callbacks.emit
        forward_step = step_function(self.config, "forward")  # a config error before anything is loaded
        fork = returnn_forward.fork_forward(self.config)  # MiniReturnn's forward: hooks, data=, no sorting
        dataset, state.extern_data, loader = build.init_forward_data(self.config, state.device, fork=fork)
        self.load_for_inference()
        path = forward.output_path(self.config, state.epoch)
        collector = forward.output_collector(self.config, dataset, state.model, state.extern_data)
        self._start_plugins()
        state.model.eval()
        # RETURNN's forward orders its data for the loaded checkpoint's epoch (Engine.forward_with_callback's
        # init_seq_order(epoch=self.epoch)); a config for this framework forwards epoch 1's order
        plan = loader.plan(max(state.epoch or 1, 1) if is_returnn_config(self.config) else 1)
        state.dataset, state.steps_in_epoch = loader.option, len(plan)
        shared = returnn_forward.ForkRunCtx(state.device, state.epoch) if fork else None
        if shared is not None:
            returnn_forward.call_hook(self.config, "forward_init_hook", shared)
        with torch.no_grad():
            for _, indices, run_ctx in self._batches("forward", loader, plan):
                emit(Event.FORWARD_STEP_START, state)
                if shared is not None:
                    tags = forward.sequence_tags(dataset, [int(i) for i in indices])
                    positions = list(range(len(collector.seq_indices), len(collector.seq_indices) + len(tags)))
                    returnn_forward.call_fork_step(forward_step, state.model, run_ctx, shared, tags, positions)
                else:
                    call_step(forward_step, state.model, run_ctx)
                emit(Event.FORWARD_STEP_END, state)
                collector.add(indices, run_ctx.outputs, run_ctx.batch)
        if shared is not None:
            returnn_forward.call_hook(self.config, "forward_finish_hook", shared)
        emit(Event.FINISH, state)
        collector.write(path, forward.sequence_tags(dataset, collector.seq_indices))
        return path, collector

    # ---------------------------------------------------------------------------------- setup
    def init_data(self, options: list[str], required: str | None) -> None:
        """Build the datasets of ``options`` plus ``eval_datasets`` and their batch loaders."""
        self.state.extern_data, self.state.loaders = build.init_data(self.config, options, required, self.state.device)

    def build_model(self, epoch: int, step: int) -> None:
        """Call the config's ``get_model`` and move the model to the device."""
        # parameters a library freezes by design are no finding of the sanity check; non-strict loads are judged
        self.state.model = build.build_model(self.config, self.state.device, epoch, step, _watch_get_model)

    def _init_model_for_training(self, num_epochs: int) -> bool:
        """Build model and optimizer, fresh or from the newest checkpoint; False if already done."""
        state = self.state
        step_function(self.config, "train")  # a missing train_step is a config error before anything is built
        path, saved, start = self.checkpoints.training_start()
        if saved is not None and saved["epoch"] >= num_epochs and "next_step" not in saved:
            prefix = self.config.get("model")
            log.v3(
                f"Training is complete: {path} is epoch {saved['epoch']} of {num_epochs}. To train further, "
                f"raise num_epochs (++num_epochs {num_epochs + 5}); to start fresh, delete the checkpoints "
                f"{prefix}.*.pt or write elsewhere with ++output_dir (the shipped configs) or ++model."
            )
            return False
        seed_everything(self.config.int("random_seed"))
        # An interrupted checkpoint is mid-epoch: that epoch is continued, not skipped.
        next_epoch = 1 if saved is None else saved["epoch"] + ("next_step" not in saved)
        # get_model gets what RETURNN's _load_model gives it (start_checkpoint's docstring): the loaded checkpoint's
        # epoch and its global step - 1 (RETURNN stores the step after counting it), 1 and 0 from scratch.
        if saved is not None:
            model_epoch, model_step, start_step = saved["epoch"], saved["global_step"] - 1, saved["global_step"]
        else:  # training_start says then what the new training starts from
            assert start is not None
            model_epoch, model_step, start_step = start.model_arguments()
        self.build_model(epoch=model_epoch, step=model_step)
        build.materialize_lazy(self.config, state.model, state.loaders["train"])
        state.step_model = (
            state.model
            if state.distributed is None
            else state.distributed.prepare(state.model, self.callbacks, declares_several(self.config))
        )
        # After prepare: FSDP replaces the parameters by their shards, which the optimizer must hold.
        state.optimizer = create_optimizers(self.config, state.model, state.distributed)
        # Before a checkpoint is restored: it may hold the gradients of an optimizer's open accumulation window.
        state.optimizer.zero_grad(set_to_none=True)
        self.checkpoints.check_room()
        if saved is None:
            self.checkpoints.load_initial_parameters(start)
            self._after_model_loaded()
            state.global_step = start_step  # RETURNN continues the global train step of 'load' or the import
        else:
            self.checkpoints.restore(saved, path, next_epoch, after_model=self._after_model_loaded)
            state.epoch, state.global_step = next_epoch - 1, saved["global_step"]
        return True

    def _after_model_loaded(self) -> None:
        """RETURNN's ``load_model_post_hooks``, once the parameters are loaded; a hook that replaced parameters gets
        an optimizer over the new ones (RETURNN creates its optimizer after the hooks), before any state is loaded."""
        state = self.state
        before = [id(param) for param in state.model.parameters()]
        start_checkpoint.call_post_hooks(self.config, state.model)
        if state.optimizer is not None and [id(param) for param in state.model.parameters()] != before:
            if state.distributed is not None:
                raise ConfigError(
                    "load_model_post_hooks replaced parameters of the model, which is already distributed here "
                    "(RETURNN runs its hooks before): change the parameters in place (param.data.copy_(...)), or "
                    "build them so in get_model."
                )
            state.optimizer = create_optimizers(self.config, state.model, state.distributed)

    def load_for_inference(self) -> None:
        """Build the model and load the checkpoint that ``load_epoch`` (default: newest) names."""
        epoch, path, saved = self.checkpoints.inference_state()
        seed_everything(self.config.int("random_seed"))
        # RETURNN's _load_model outside training: get_model and the steps get the checkpoint's global step - 1
        self.build_model(epoch=epoch, step=saved["global_step"])
        self.checkpoints.load_for_inference(saved, path)
        self.state.epoch, self.state.global_step = saved["epoch"], saved["global_step"]
        start_checkpoint.call_post_hooks(self.config, self.state.model)
        if path is not None:
            log.v4(f"Loaded {path}")

    def _set_learning_rate(self, lr: float) -> None:
        """The epoch's scheduled rate, into every param group at its multiplier (per-step schedules adjust it)."""
        self.state.learning_rate = lr
        optim.set_learning_rate(self.state.optimizer, lr)


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


def _raised_at(exc: BaseException) -> dict[str, str]:
    """``{"file:line": ...}`` of the innermost frame of ``exc``'s traceback (empty without one)."""
    tb = exc.__traceback__
    if tb is None:
        return {}
    while tb.tb_next is not None:
        tb = tb.tb_next
    return {"file:line": f"{tb.tb_frame.f_code.co_filename}:{tb.tb_lineno}"}
