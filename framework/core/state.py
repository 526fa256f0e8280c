"""The typed state of a run that callbacks read, and the one channel through which they act.

The engine owns a ``RunState`` and updates it as the run goes; every callback gets it. A
callback never sets engine internals: it asks through ``state.control`` (skip this update,
stop after this step, end after this epoch, add to the step line); a finding is reported through
``framework.base.findings.report``, and the run keeps every one in ``state.control.findings``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from framework.core.store import Store

if TYPE_CHECKING:
    import numpy as np
    import torch

    from framework.base.config import Config
    from framework.base.findings import Finding
    from framework.core.autocast import Precision
    from framework.core.run_ctx import RunCtx
    from framework.core.scores import ScoreAccumulator, Scores
    from framework.datasets.extern_data import DataKey
    from framework.datasets.loader import BatchLoader


class SummarySink(Protocol):
    """Where ``run_ctx.log_scalar`` / ``log_image`` and diagnostics' scalars go (TensorBoard)."""

    def scalar(self, tag: str, value: float, step: int) -> None: ...

    def scalars(self, step: int, values: list[tuple[str, float]]) -> None: ...

    def image(self, tag: str, image: Any, step: int, dataformats: str) -> None: ...


def either(flag: torch.Tensor | None, other: torch.Tensor | None) -> torch.Tensor | None:
    """Device flags (bool, or float32 1.0/0.0) combined: true where either is; None where both are."""
    if flag is None or other is None:
        return other if flag is None else flag
    return (flag != 0) | (other != 0)


class Control:
    """What callbacks may ask of the engine; the engine reads it at fixed points of the loop."""

    def __init__(self) -> None:
        self.update_skipped = False
        self.skip_flag: torch.Tensor | None = None  # on the device: skip the update where true
        self.optimizer_skip_flags: dict[str, torch.Tensor] = {}  # several optimizers: skip one optimizer's update
        self.stop_reason: str | None = None
        self.checkpoint_reason: str | None = None  # a mid-epoch checkpoint was asked for (and not yet written)
        self.end_reason: str | None = None
        self.findings: list[Finding] = []  # every finding of the run so far (framework.core.run_findings keeps them)
        self.step_notes: dict[str, str] = {}
        self.changes: dict[str, Any] = {}  # RunState fields a plugin asked to change; the engine applies them

    def use_step_model(self, model: torch.nn.Module) -> None:
        """From the next step on, ``train_step`` gets ``model`` (e.g. the compiled model)."""
        self.changes["step_model"] = model

    def scale_loss_by(self, scale: torch.Tensor | None) -> None:
        """Multiply the loss by the device tensor ``scale`` before backward (loss scaling); None: do not."""
        self.changes["loss_scale"] = scale

    def use_loader(self, option: str, loader: BatchLoader) -> None:
        """After this event, the batches of dataset ``option`` come from ``loader`` (e.g. a verdict run's)."""
        self.changes.setdefault("loaders", {})[option] = loader

    def send_summaries_to(self, sink: SummarySink | None) -> None:
        """Where ``run_ctx.log_scalar`` and diagnostics' scalars go from now on (None: nowhere)."""
        self.changes["summaries"] = sink

    def continue_learning_rates(self, epoch_lrs: dict[int, float], scores: dict[int, Any]) -> None:
        """Continue the learning-rate schedule after these epochs' rates and scores (``learning_rate_file``)."""
        self.changes["learning_rates"] = (epoch_lrs, scores)

    def skip_update(self) -> None:
        """Do not apply this step's optimizer update (its gradients are dropped)."""
        self.update_skipped = True

    def skip_update_if(self, flag: torch.Tensor) -> None:
        """Skip this step's update where the device tensor ``flag`` is true, decided on the device (no host sync).

        ``flag`` is a bool, or a float32 that is 1.0 or 0.0: the form fused optimizers read (``found_inf``), which
        ``optim.step_unless`` then hands over without converting it.
        """
        self.skip_flag = either(self.skip_flag, flag)

    def skip_optimizer_if(self, name: str, flag: torch.Tensor) -> None:
        """Several optimizers: skip optimizer ``name``'s update of this step where the device tensor ``flag`` is
        true (the others step); ``flag`` as in ``skip_update_if``."""
        self.optimizer_skip_flags[name] = either(self.optimizer_skip_flags.get(name), flag)

    @property
    def any_skip_flag(self) -> torch.Tensor | None:
        """On the device: whether this step's update, or some optimizer's part of it, may be skipped (None: not)."""
        combined = self.skip_flag
        for flag in self.optimizer_skip_flags.values():
            combined = either(combined, flag)
        return combined

    def update_done(self) -> None:
        """The engine's mark after each update boundary: the next update is not skipped unless asked again."""
        self.update_skipped, self.skip_flag = False, None
        self.optimizer_skip_flags = {}

    def stop(self, reason: str) -> None:
        """Stop training at the next update boundary with a checkpoint to resume from (like Ctrl-C)."""
        self.stop_reason = reason

    def checkpoint(self, reason: str) -> None:
        """Write the mid-epoch checkpoint at the next update boundary and go on training."""
        self.checkpoint_reason = reason

    @property
    def checkpoint_asked(self) -> bool:
        """Whether a mid-epoch checkpoint is due at the next update boundary: asked for, or to stop with."""
        return self.checkpoint_reason is not None or self.stop_reason is not None

    def end_training(self, reason: str) -> None:
        """End training after the current epoch, whose checkpoint is written (e.g. early stopping)."""
        self.end_reason = reason

    def note_step(self, key: str, text: str) -> None:
        """Add ``key text`` to this step's progress line (log_verbosity 5)."""
        self.step_notes[key] = text


@dataclass(eq=False)
class RunState:
    """What a run is doing: its setup, the current epoch and step, and how it ended."""

    config: Config
    task: str
    device: torch.device
    distributed: Any = None  # the process group under torchrun (framework.training.distributed.Distributed)
    extern_data: dict[str, DataKey] = field(default_factory=dict)
    loaders: dict[str, BatchLoader] = field(default_factory=dict)
    model: torch.nn.Module | None = None
    step_model: torch.nn.Module | None = None  # what train_step gets: the model, or its DDP wrapper
    optimizer: torch.optim.Optimizer | None = None
    lr_control: Any = None  # RETURNN's learning-rate control (framework.training.lr_control.LearningRateControl)
    learning_rate: float = 0.0
    epoch: int = 0
    global_step: int = 0  # training steps done; during a step (until STEP_END), the index of that step
    # The step in progress (training, evaluation or forward).
    dataset: str | None = None  # the dataset option the batch is from (train, dev, dev_other, ...)
    step_in_epoch: int = 0
    steps_in_epoch: int = 0
    batch: dict[str, torch.Tensor] | None = None
    batch_indices: np.ndarray | None = None
    run_ctx: RunCtx | None = None
    # time.perf_counter() where a training step's phases begin and end, taken by the engine: the batch is there, the
    # step function is called, it returned, backward is done (StepTimer splits the step time by them)
    step_clock: list[float] = field(default_factory=lambda: [0.0] * 4)
    # Scores.
    epoch_scores: ScoreAccumulator | None = None  # the train losses summed so far in this epoch
    eval_scores: Scores = field(default_factory=dict)  # {dataset: {loss: value}} of the latest evaluation
    summaries: SummarySink | None = None
    # Mixed precision (framework.core.autocast): the autocast of step functions, the factor the loss is scaled by.
    precision: Precision | None = None
    loss_scale: torch.Tensor | None = None  # on the device; None: the loss is not scaled
    control: Control = field(default_factory=Control)
    store: Store = field(default_factory=Store)  # measurements plugins share (each key has one declared producer)
    # How it ended.
    exception: BaseException | None = None
    outcome: str | None = None  # for CLOSE: completed, stopped, interrupted, exception

    @property
    def stage(self) -> str | None:
        """train, eval or forward while a step runs; None between steps."""
        return self.run_ctx.stage if self.run_ctx is not None else None

    def at_update_boundary(self) -> bool:
        """Whether the current training step ends an accumulation window: it updates, no gradients stay pending.

        A RETURNN config's windows are RETURNN's (Engine.train_epoch): counted from the epoch's first step, an
        epoch's last partial window is no update (its gradients are dropped when the next epoch starts), and an
        ``accum_grad_multiple_step`` function is called after each step as RETURNN calls it (``epoch``,
        ``epoch_continuous``, ``global_train_step``); the window ends once it has as many steps as it returns."""
        from framework.core import accumulation

        return accumulation.update_boundary(self)
