"""The engine: epochs -> batches -> train_step -> loss -> backward -> optimizer step.

The loop below is all there is to training. Everything optional (clipping, schedules,
progress lines, diagnostics) is a callback bound to an ``Event``; the loop only emits events.
Attributes of the engine are the training state that callbacks read.
"""

from __future__ import annotations

import contextlib
import os
import time
from typing import Any

import numpy as np
import torch

from framework import checkpoint, debug, log
from framework.config import Config
from framework.datasets import init_dataset
from framework.datasets.extern_data import DataKey, check_dataset, extern_data_from_dataset, parse_extern_data
from framework.datasets.loader import BatchLoader
from framework.distributed import Distributed
from framework.early_stopping import install_early_stopping
from framework.errors import CheckpointError, ConfigError
from framework.events import Callbacks, Event, StopTraining
from framework.lr_control import LearningRateControl, install_dynamic_learning_rate
from framework.optim import create_optimizer, install_gradient_clipping
from framework.progress import StepProgress
from framework.rng import get_rng_state, seed_everything, set_rng_state
from framework.run_ctx import RunCtx
from framework.scores import ScoreAccumulator, format_scores


def select_device(name: str) -> torch.device:
    """``auto`` is cuda when available, else cpu; an unavailable device is a config error."""
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        device = torch.device(name)
    except RuntimeError:
        raise ConfigError(f"device {name!r} is not a torch device name (auto, cpu, cuda, cuda:1, mps).") from None
    if device.type == "cuda" and not torch.cuda.is_available():
        raise ConfigError(f"device {name!r} is requested but CUDA is not available here; use device='auto' or 'cpu'.")
    return device


class Engine:
    """Runs a config's task: train, eval or forward."""

    def __init__(self, config: Config, callbacks: Callbacks | None = None):
        self.config = config
        self.callbacks = callbacks or Callbacks()
        self.device = select_device(config.get("device"))
        self.distributed: Distributed | None = None
        if config.get("torch_distributed") is not None:
            if self.device.type == "cuda":
                self.device = torch.device("cuda", int(os.environ.get("LOCAL_RANK", "0")))
            self.distributed = Distributed(config.get("torch_distributed"), self.device)
        self.model: torch.nn.Module | None = None
        self.step_model: torch.nn.Module | None = None  # what train_step gets: the model, or its DDP wrapper
        self.optimizer: torch.optim.Optimizer | None = None
        self.lr_control = LearningRateControl(config)
        self.learning_rate = config.float("learning_rate")
        self.epoch = 0
        self.global_step = 0
        self.step_in_epoch = 0
        self.steps_in_epoch = 0
        self.batch: dict[str, torch.Tensor] | None = None
        self.batch_indices: np.ndarray | None = None
        self.run_ctx: RunCtx | None = None
        self.skip_update = False
        self.exception: BaseException | None = None
        self.stop_requested: str | None = None
        self.end_reason: str | None = None  # set by end_training: training ends after this epoch
        self.findings: list[Any] = []  # what the sanity check found (data_checks.Finding)
        self.step_info: dict[str, str] = {}  # extra fields for the step line, filled by diagnostics
        self.grad_norm: torch.Tensor | None = None  # set when gradient clipping computes it
        self.summaries: Any = None  # where run_ctx.log_image/log_scalar go (TensorBoard), if anywhere
        self._resume: dict[str, Any] | None = None  # mid-epoch position from an interrupted checkpoint
        self.epoch_scores: ScoreAccumulator | None = None  # the train losses summed so far in this epoch
        self.extern_data: dict[str, DataKey] = {}
        self.loaders: dict[str, BatchLoader] = {}

    # ------------------------------------------------------------------------------- training
    def train(self) -> None:
        """Train for ``num_epochs``, resuming from the newest checkpoint of ``model`` if there is one."""
        if not self.init_train():
            return
        num_epochs = self.config.int("num_epochs")  # after init_train: a verdict run sets its own
        try:
            with self._reporting_exceptions():
                self._train_epochs(num_epochs)
        except StopTraining as stop:
            log.v3(f"Training ended: {stop}")
        self.callbacks.emit(Event.FINISH, self)

    def _train_epochs(self, num_epochs: int) -> None:
        for epoch in range(self.epoch + 1, num_epochs + 1):
            if self.end_reason is not None:
                log.v3(f"Training ended after epoch {self.epoch}: {self.end_reason}")
                return
            self.epoch = epoch
            self._set_learning_rate(self.lr_control.learning_rate(epoch))
            start = time.perf_counter()
            train_scores = self.train_epoch()
            log.v3(
                f"Epoch {epoch} train: {format_scores(train_scores)}, {self.steps_in_epoch} steps, "
                f"{time.perf_counter() - start:.1f} sec, lr {self.learning_rate:g}"
            )
            eval_scores = {option: self.evaluate(option) for option in self.loaders if option != "train"}
            if eval_scores:
                log.v3(
                    f"Epoch {epoch} evaluation: "
                    + " ".join(f"{option}: {format_scores(s)}" for option, s in eval_scores.items())
                )
            self.lr_control.record(epoch, _flat_scores({"train": train_scores, **eval_scores}))
            self.callbacks.emit(Event.EPOCH_END, self)
            self._save_checkpoint()

    @contextlib.contextmanager
    def _reporting_exceptions(self):
        """Let EXCEPTION callbacks see an exception (and annotate it); it propagates unchanged."""
        try:
            yield
        except StopTraining:
            raise
        except Exception as exc:
            self.exception = exc
            self.callbacks.emit(Event.EXCEPTION, self)
            raise

    def init_train(self) -> bool:
        """Datasets, model and optimizer, fresh or resumed; False if training is already complete."""
        debug.prepare_run(self.config)
        self.init_data(["train", "dev", "eval"], required="train")
        if not self._init_model_for_training(self.config.int("num_epochs")):
            return False
        self.optimizer.zero_grad(set_to_none=True)
        self.callbacks.emit(Event.STARTUP, self)
        return True

    def train_epoch(self) -> dict[str, float]:
        """One pass over the train dataset's batches of ``self.epoch``; returns the train scores."""
        loader = self.loaders["train"]
        plan = loader.plan(self.epoch)
        if self.distributed is not None:
            plan = self.distributed.train_plan(plan)
        accum = self.config.int("accum_grad_multiple_step")
        loss_weights = _accumulation_weights(plan, accum)
        scores = self.epoch_scores = ScoreAccumulator()
        start = 0
        if self._resume is not None and self._resume["epoch"] == self.epoch:
            start = self._resume["next_step"]
            scores.load_state_dict(self._resume["scores"])
            log.v3(f"Continuing epoch {self.epoch} at step {start} of {len(plan)}.")
        self._resume = None
        self.steps_in_epoch = len(plan)
        self.model.train()
        self.callbacks.emit(Event.EPOCH_START, self)
        for i, (indices, batch) in enumerate(loader.iterate(plan[start:]), start=start):
            self.step_in_epoch, self.batch_indices, self.batch = i, indices, batch
            self.run_ctx = RunCtx(
                stage="train", epoch=self.epoch, step=self.global_step, batch=batch, summaries=self.summaries
            )
            with self.run_ctx:
                self.callbacks.emit(Event.STEP_START, self)
                self.config.get("train_step")(model=self.step_model, extern_data=batch, run_ctx=self.run_ctx)
                self.callbacks.emit(Event.AFTER_FORWARD, self)
                loss = self.run_ctx.total_loss()
                (loss if loss_weights is None else loss * loss_weights[i]).backward()
                self.callbacks.emit(Event.AFTER_BACKWARD, self)
                scores.add(self.run_ctx, len(indices))
                if self.at_update_boundary():
                    self.callbacks.emit(Event.BEFORE_OPTIMIZER_STEP, self)
                    if not self.skip_update:
                        self.optimizer.step()
                    self.skip_update = False
                    self.optimizer.zero_grad(set_to_none=True)
                    self.callbacks.emit(Event.AFTER_OPTIMIZER_STEP, self)
                self.global_step += 1
                self.callbacks.emit(Event.STEP_END, self)
        if not plan:
            raise ConfigError(f"The train dataset ({loader.dataset.name}) delivered no batches in epoch {self.epoch}.")
        return scores.result(self._total)

    def end_training(self, reason: str) -> None:
        """End training after the current epoch (its checkpoint is written), e.g. early stopping."""
        self.end_reason = reason

    def request_stop(self, reason: str = "stop requested") -> None:
        """Stop training at the next update boundary, writing a checkpoint to resume from."""
        self.stop_requested = reason

    def at_update_boundary(self) -> bool:
        """Whether the current step ends an accumulation window: it updates, no gradients stay pending."""
        accum = self.config.int("accum_grad_multiple_step")
        return (self.step_in_epoch + 1) % accum == 0 or self.step_in_epoch + 1 == self.steps_in_epoch

    def evaluate(self, option: str) -> dict[str, float]:
        """Scores of ``train_step``'s losses over dataset ``option`` (dev, eval, ...), without updates."""
        loader = self.loaders[option]
        scores = ScoreAccumulator()
        self.model.eval()
        plan = loader.plan(max(self.epoch, 1))
        # Fewer batches than ranks: every rank scores all of them (no rank without scores to sum).
        shard = self.distributed is not None and len(plan) >= self.distributed.size
        if shard:
            plan = self.distributed.eval_plan(plan)
        with torch.no_grad():
            for indices, batch in loader.iterate(plan):
                self.batch_indices, self.batch = indices, batch
                self.run_ctx = RunCtx(
                    stage="eval", epoch=self.epoch, step=self.global_step, batch=batch, summaries=self.summaries
                )
                with self.run_ctx:
                    self.config.get("train_step")(model=self.model, extern_data=batch, run_ctx=self.run_ctx)
                scores.add(self.run_ctx, len(indices))
        return scores.result(self._total if shard else None)

    @property
    def _total(self):
        """Sums over all processes (None: a single process)."""
        return self.distributed.sum if self.distributed is not None else None

    def run_eval(self) -> dict[str, dict[str, float]]:
        """task=eval: score the dev/eval datasets with a checkpoint."""
        self.init_data(["dev", "eval"], required=None)
        if not self.loaders:
            raise ConfigError("task='eval' needs a 'dev' or 'eval' dataset (or 'eval_datasets').")
        self.load_for_inference()
        with self._reporting_exceptions():
            results = {option: self.evaluate(option) for option in self.loaders}
        log.v3(
            f"Evaluation of epoch {self.epoch}: "
            + " ".join(f"{option}: {format_scores(s)}" for option, s in results.items())
        )
        return results

    # ---------------------------------------------------------------------------------- setup
    def init_data(self, options: list[str], required: str | None) -> None:
        """Build the datasets of ``options`` plus ``eval_datasets`` and their batch loaders."""
        seed = self.config.int("random_seed")
        specs = {o: self.config.get(o) for o in options if self.config.get(o) is not None}
        specs.update(self.config.get("eval_datasets") or {})
        if required and required not in specs:
            raise ConfigError(f"task={self.config.get('task')!r} needs the {required!r} dataset option.")
        datasets = {option: init_dataset(spec, option=option, random_seed=seed) for option, spec in specs.items()}
        self.extern_data = self.resolve_extern_data(next(iter(datasets.values()), None))
        for option, dataset in datasets.items():
            check_dataset(self.extern_data, dataset, option)
            self.loaders[option] = self.make_loader(option, dataset)
            log.v4(f"Dataset {option}: {dataset.name}, {dataset.num_seqs} seqs")

    def resolve_extern_data(self, dataset: Any) -> dict[str, DataKey]:
        """The config's ``extern_data``, or else the keys that ``dataset`` describes."""
        declared = self.config.get("extern_data")
        if declared is not None:
            return parse_extern_data(declared)
        return extern_data_from_dataset(dataset) if dataset is not None else {}

    def make_loader(self, option: str, dataset: Any, extern_data: dict[str, DataKey] | None = None) -> BatchLoader:
        """A batch loader for ``dataset`` with the configured batching and device."""
        return BatchLoader(
            dataset,
            self.extern_data if extern_data is None else extern_data,
            option=option,
            batch_size=self.config.int("batch_size"),
            max_seqs=self.config.get("max_seqs"),
            device=self.device,
            dataloader_opts=self.config.get("torch_dataloader_opts"),
        )

    def build_model(self, epoch: int, step: int) -> None:
        """Call the config's ``get_model`` and move the model to the device."""
        get_model = self.config.get("get_model")
        if get_model is None:
            raise ConfigError("The config defines no get_model(*, epoch, step, **kwargs) returning an nn.Module.")
        model = get_model(epoch=epoch, step=step)
        if not isinstance(model, torch.nn.Module):
            raise ConfigError(f"get_model returned {type(model).__name__}, not a torch.nn.Module.")
        self.model = model.to(self.device)
        num_params = sum(p.numel() for p in self.model.parameters())
        log.v4(f"Model: {type(model).__name__}, {num_params:,} parameters, on {self.device}")

    def _init_model_for_training(self, num_epochs: int) -> bool:
        """Build model and optimizer, fresh or from the newest checkpoint; False if already done."""
        if self.config.get("train_step") is None:
            raise ConfigError("task='train' needs train_step(*, model, extern_data, run_ctx, **kwargs) in the config.")
        prefix = self.config.get("model")
        path, state = self._newest_training_state(prefix) if prefix else (None, None)
        if state is not None and state["epoch"] >= num_epochs and "next_step" not in state:
            log.v3(
                f"Training is complete: {path} is epoch {state['epoch']} of {num_epochs}. "
                f"Raise num_epochs to train further."
            )
            return False
        seed_everything(self.config.int("random_seed"))
        # An interrupted checkpoint is mid-epoch: that epoch is continued, not skipped.
        next_epoch = 1 if state is None else state["epoch"] + ("next_step" not in state)
        self.build_model(epoch=next_epoch, step=0 if state is None else state["global_step"])
        self.optimizer = create_optimizer(self.config, self.model)
        self.step_model = (
            self.model if self.distributed is None else self.distributed.prepare(self.model, self.callbacks)
        )
        install_gradient_clipping(self.config, self.callbacks)
        install_dynamic_learning_rate(self.config, self.callbacks)
        install_early_stopping(self.config, self)
        _install_user_callbacks(self.config, self.callbacks)  # before diagnostics: TensorBoard is still open at FINISH
        debug.install(self)
        if log.enabled(5):
            StepProgress().install(self.callbacks)  # last: it prints what diagnostics put in step_info
        if state is None and self.config.get("import_model_train_epoch1"):
            imported = self.config.get("import_model_train_epoch1")
            checkpoint.load_model_state(self.model, checkpoint.load_checkpoint(imported)["model"], imported)
            log.v3(f"Training starts from the parameters of {imported} (import_model_train_epoch1).")
        if state is not None:
            self._restore(state, path)
            log.v3(f"Resuming from {path}: epoch {self.epoch}, global step {self.global_step}.")
            self.epoch = next_epoch - 1
            if "next_step" in state:
                self._resume = {"epoch": state["epoch"], "next_step": state["next_step"], "scores": state["scores"]}
        return True

    def _newest_training_state(self, prefix: str) -> tuple[str | None, dict[str, Any] | None]:
        """The newest epoch checkpoint, or an interrupted (mid-epoch) one if that is newer."""
        checkpoint.remove_stale_temp_files(prefix)
        found = checkpoint.list_checkpoints(prefix)
        path = found[max(found)] if found else None
        interrupted = checkpoint.interrupted_path(prefix)
        if os.path.exists(interrupted):
            state = checkpoint.load_checkpoint(interrupted)
            if state["epoch"] > (max(found) if found else 0):
                return interrupted, state
            checkpoint.remove_interrupted(prefix)  # an epoch checkpoint already covers it
        return path, checkpoint.load_checkpoint(path) if path else None

    def _restore(self, state: dict[str, Any], path: str) -> None:
        checkpoint.load_model_state(self.model, state["model"], path)
        try:
            self.optimizer.load_state_dict(state["optimizer"])
        except (ValueError, KeyError) as exc:
            raise CheckpointError(
                f"Checkpoint {path}: the optimizer state does not fit the configured optimizer "
                f"({exc}). Did 'optimizer' change since it was written?"
            ) from None
        self.lr_control.load_state_dict(state["learning_rate_control"])
        self.epoch, self.global_step = state["epoch"], state["global_step"]
        set_rng_state(state["rng"])

    def load_for_inference(self) -> None:
        """Build the model and load the checkpoint that ``load_epoch`` (default: newest) names."""
        prefix = self.config.get("model")
        found = checkpoint.list_checkpoints(prefix) if prefix else {}
        if not found:
            raise ConfigError(
                f"task={self.config.get('task')!r} needs a trained checkpoint, but 'model' = {prefix!r} "
                f"has none. Train first, or set 'model' to the checkpoint prefix."
            )
        epoch = self.config.get("load_epoch") or max(found)
        if epoch not in found:
            raise ConfigError(f"load_epoch = {epoch}, but the checkpoints of {prefix!r} are epochs {sorted(found)}.")
        state = checkpoint.load_checkpoint(found[epoch])
        seed_everything(self.config.int("random_seed"))
        self.build_model(epoch=epoch, step=state["global_step"])
        checkpoint.load_model_state(self.model, state["model"], found[epoch])
        self.epoch, self.global_step = state["epoch"], state["global_step"]
        log.v4(f"Loaded {found[epoch]}")

    def _set_learning_rate(self, lr: float) -> None:
        self.learning_rate = lr
        for group in self.optimizer.param_groups:
            group["lr"] = lr

    def _checkpoint_state(self) -> dict[str, Any]:
        return {
            "model": self.model.state_dict(),
            "optimizer": self.optimizer.state_dict(),
            "epoch": self.epoch,
            "global_step": self.global_step,
            "rng": get_rng_state(),
            "learning_rate_control": self.lr_control.state_dict(),
        }

    def _save_checkpoint(self) -> None:
        prefix = self.config.get("model")
        if not prefix or (self.distributed is not None and self.distributed.rank != 0):
            return
        path = checkpoint.checkpoint_path(prefix, self.epoch)
        checkpoint.save_checkpoint(path, self._checkpoint_state())
        log.v4(f"Saved checkpoint {path}")
        checkpoint.remove_interrupted(prefix)
        self.callbacks.emit(Event.CHECKPOINT_SAVED, self)

    def save_interrupted_checkpoint(self) -> str | None:
        """Write ``<model>.interrupted.pt``: the state after the current step, to resume mid-epoch."""
        prefix = self.config.get("model")
        if not prefix or (self.distributed is not None and self.distributed.rank != 0):
            return None
        state = self._checkpoint_state()
        state.update(next_step=self.step_in_epoch + 1, scores=self.epoch_scores.state_dict())
        path = checkpoint.interrupted_path(prefix)
        checkpoint.save_checkpoint(path, state)
        return path


def _accumulation_weights(plan: list[np.ndarray], accum: int) -> list[float] | None:
    """Per batch, its share of the sequences in its accumulation window (None without accumulation).

    Scaling each batch's loss by this share makes the accumulated gradient that of one batch
    holding the whole window, also when batches differ in size (e.g. the last one).
    """
    if accum <= 1:
        return None
    weights = []
    for start in range(0, len(plan), accum):
        window = plan[start : start + accum]
        total = sum(len(b) for b in window)
        weights.extend(len(b) / total for b in window)
    return weights


def _flat_scores(scores: dict[str, dict[str, float]]) -> dict[str, float]:
    """``{"dev": {"ce": x}}`` -> ``{"dev_ce": x}``."""
    return {f"{option}_{name}": value for option, values in scores.items() for name, value in values.items()}


def _install_user_callbacks(config: Config, callbacks: Callbacks) -> None:
    """The config's ``callbacks = {"epoch_end": fn, ...}``, each bound to its event."""
    names = {event.value: event for event in Event}
    for name, fns in (config.get("callbacks") or {}).items():
        if name not in names:
            raise ConfigError(f"callbacks: unknown event {name!r}; events are {', '.join(names)}.")
        for fn in fns if isinstance(fns, (list, tuple)) else [fns]:
            if not callable(fn):
                raise ConfigError(f"callbacks[{name!r}] must be a function fn(engine) or a list of them, got {fn!r}.")
            callbacks.on(names[name], fn)
