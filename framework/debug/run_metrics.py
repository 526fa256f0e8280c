"""The run's metrics file, ``<model directory>/metrics.jsonl``: what ``python -m framework report`` draws.

One JSON object per line: ``run`` (when a run starts: its time, command line, task, the options that differ
from the defaults, the class of each module that holds parameters), ``steps`` (columns: the global step, epoch, applied learning rate and every marked loss
of each training step), ``scalars`` (what diagnostics send to the summary sink: per-parameter gradient
norms of the gradient-health check every ``debug_grad_health`` updates, a config's
``run_ctx.log_scalar``), ``memory`` (process RSS and the accelerator's allocated and reserved memory, with each ``steps`` record) and
``epoch`` (train and dev scores at the epoch's last global step and the time, and the chance level of each loss whose chance
level a check computed) and ``end`` (how the run ended, as the summary
says it, and when).

It costs no host sync per step: the step's losses are the values the run reads anyway (on the CPU,
the host values the epoch scores read; on an accelerator, the device values, read with one copy
when the records are written: every ``_FLUSH_STEPS`` steps, at the end of each epoch and of the run). The file is
appended to (a resumed run continues it) as a ``framework.base.record_file``: opened without following a planted link,
a line a dead run cut short set aside first; a write that fails (full disk, lost permission) ends the run with
one line naming the file (exit 1), the records before it and the checkpoints intact. Rank 0 writes it;
``metrics_file = False`` turns it off.
"""

from __future__ import annotations

import datetime
import json
import math
import sys
from typing import Any

import torch

from framework.base import options
from framework.base.accelerator import memory_stats
from framework.base.config import Config
from framework.base.disk import beside_checkpoints
from framework.base.options import register
from framework.base.record_file import RecordFile
from framework.base.util import command_line
from framework.core.events import Event, Order
from framework.core.measurements import CHANCE_LEVELS, ERROR_CHANCE_LEVELS
from framework.core.plugin import Plugin, on
from framework.core.run_summary import how_it_ended
from framework.core.state import RunState
from framework.debug.memory import rss
from framework.training.optim import base_learning_rate

register(
    "metrics_file",
    "bool",
    True,
    "Write <model directory>/metrics.jsonl (losses per step, scores per epoch, gradient norms, memory): what "
    "'python -m framework report' draws.",
    __name__,
)

FILE_NAME = "metrics.jsonl"
# Steps are written (device values read with one copy, memory sampled) every this many steps and at each epoch's
# end: a buffer that grew over a long epoch would look like a leak to debug_leak_check.
_FLUSH_STEPS = 100


class RunMetrics(Plugin):
    """Appends the run's metrics to ``metrics.jsonl`` beside the checkpoints."""

    after = ("TensorBoardLogger",)  # its STARTUP passes the diagnostics' scalars on to TensorBoard, the sink by then

    def __init__(self, path: str):
        self.path = path
        self.file = RecordFile(
            path,
            "the metrics file",
            "Free space on its disk or make it writable, then run the same command again: it continues from the "
            "newest checkpoint (or set metrics_file = False).",
        )
        # Training steps not yet written, as columns: global step, epoch, applied learning rate, and the values of the
        # losses ``names`` (host numbers, or device tensors until the flush), one after the other per step.
        self.steps: list[int] = []
        self.epochs: list[int] = []
        self.lrs: list[float] = []
        self.names: tuple[str, ...] = ()
        self.values: list[Any] = []
        self.lines: list[str] = []  # records of other kinds not yet written, in order
        self.sink: Any = None  # the summary sink (TensorBoard) that scalars are passed on to

    @classmethod
    def from_config(cls, config: Config, state: RunState) -> RunMetrics | None:
        prefix = config.get("model")
        writes = state.distributed is None or state.distributed.rank == 0
        if not config.bool("metrics_file") or not prefix or not writes or state.task != "train":
            return None
        return cls(beside_checkpoints(prefix, FILE_NAME))

    @on(Event.STARTUP, Order.FIRST)
    def start(self, state: RunState) -> None:
        """Open the file, record the run, and see the diagnostics' scalars (passing them on to TensorBoard)."""
        self.file.open()
        self._record(
            "run",
            step=state.global_step,
            epoch=state.epoch,
            time=now(),
            command=command_line(),
            task=state.task,
            model=state.config.get("model"),
            options=changed_options(state.config),
            modules=parameter_owners(state.model),
        )
        self.sink = state.control.changes.get("summaries", state.summaries)  # TensorBoard became the sink just now
        state.control.send_summaries_to(self)

    # -- the summary sink: scalars are kept (host values), images only passed on
    def scalar(self, tag: str, value: float, step: int) -> None:
        self.scalars(step, [(tag, value)])

    def scalars(self, step: int, values: list[tuple[str, float]]) -> None:
        host = {tag: float(v) for tag, v in values if not isinstance(v, torch.Tensor)}  # a device value: TensorBoard's
        if host:
            self._record("scalars", step=step, values=host)
        if self.sink is not None:
            self.sink.scalars(step, values)

    def image(self, tag: str, image: Any, step: int, dataformats: str) -> None:
        if self.sink is not None:
            self.sink.image(tag, image, step, dataformats)

    @on(Event.STEP_END)
    def on_step_end(self, state: RunState) -> None:
        losses = state.run_ctx.losses
        if not losses:
            return
        if tuple(losses) != self.names:  # the step marks other losses than the buffered ones: a record of its own
            self.flush(state)
            self.names = tuple(losses)
        if next(iter(losses.values())).loss.is_cpu:  # the values the epoch scores read already
            self.values.extend([_normalized(*marked.host_values()) for marked in losses.values()])
        else:  # read with the other steps' at the next flush
            self.values.extend([marked.normalized().detach() for marked in losses.values()])
        self.steps.append(state.run_ctx.step)
        self.epochs.append(state.epoch)
        self.lrs.append(base_learning_rate(state.optimizer))
        if len(self.steps) >= _FLUSH_STEPS:
            self.flush(state)

    @on(Event.EPOCH_END)
    def on_epoch_end(self, state: RunState) -> None:
        scores = state.lr_control.scores.get(state.epoch, {})
        lr = base_learning_rate(state.optimizer)
        levels = {**(state.store.get(CHANCE_LEVELS) or {}), **(state.store.get(ERROR_CHANCE_LEVELS) or {})}
        chance = {name: level.value for name, level in levels.items()}
        self._record(
            "epoch", step=state.global_step, epoch=state.epoch, lr=lr, scores=scores, chance=chance, time=now()
        )
        self.flush(state)

    @on(Event.CLOSE)
    def close(self, state: RunState) -> None:
        """Write what is left and close the file, however the run ended."""
        state.control.send_summaries_to(None)
        if not self.file.is_open:  # STARTUP did not run, or a write failed (the run ends with that error)
            return
        try:
            ended = how_it_ended(state.outcome, sys.exc_info()[1])  # the run's own error or interruption, on its way
            self._record("end", step=state.global_step, epoch=state.epoch, ended=ended, time=now())
            self.flush(state)
        finally:
            self.file.close()

    def flush(self, state: RunState) -> None:
        """Write the buffered records: the steps as one record of columns (their device values read with one copy),
        then the memory now."""
        if self.steps:
            on_device = [v.float() for v in self.values if isinstance(v, torch.Tensor)]
            read = iter(torch.stack(on_device).tolist() if on_device else [])
            values = [next(read) if isinstance(v, torch.Tensor) else v for v in self.values]
            k = len(self.names)
            losses = {name: values[i::k] for i, name in enumerate(self.names)}
            self._record("steps", step=self.steps, epoch=self.epochs, lr=self.lrs, losses=losses)
            self.steps, self.epochs, self.lrs, self.values = [], [], [], []
            self._memory(state)
        lines, self.lines = self.lines, []
        self.file.append(lines)

    def _memory(self, state: RunState) -> None:
        """The host process's RSS; on an accelerator, the memory its tensors take and the memory the caching
        allocator holds (reserved)."""
        stats = memory_stats(state.device)
        device_mb = None if stats is None else stats["allocated"] / 1024**2
        reserved = {} if stats is None else {"reserved_mb": stats["reserved"] / 1024**2}
        self._record("memory", step=state.global_step, rss_mb=rss() / 1024**2, device_mb=device_mb, **reserved)

    def _record(self, kind: str, **fields: Any) -> None:
        self.lines.append(_json({"kind": kind, **fields}))


def now() -> str:
    """The local time with its UTC offset, to the second."""
    return datetime.datetime.now().astimezone().isoformat(timespec="seconds")


def _normalized(loss: float, norm: float | None) -> float:
    return loss if norm is None else loss / norm if norm else math.nan


def _json(record: dict[str, Any]) -> str:
    return json.dumps(record, default=str)


def parameter_owners(model: torch.nn.Module, limit: int = 500) -> dict[str, str]:
    """Module path -> class name of the modules that hold parameters themselves (the layer groups of the gradient
    norms), at most ``limit``."""
    owners = {}
    for path, module in model.named_modules():
        if next(module.parameters(recurse=False), None) is not None:
            owners[path or "(model)"] = type(module).__name__
            if len(owners) >= limit:
                break
    return owners


def changed_options(config: Config) -> dict[str, str]:
    """The registered options the config sets to something other than their default, as ``repr`` text."""
    changed = {}
    for name in sorted(set(config.namespace) | set(config.overrides) | set(config.derived)):
        option = options.get(name)
        if option is None or name == "config":
            continue
        value = config.get(name)
        try:
            same = value == option.default
            same = bool(same)
        except Exception:  # a value without a plain truth value (an array)
            same = False
        if not same:
            text = repr(value) if not callable(value) else getattr(value, "__qualname__", repr(value))
            changed[name] = text if len(text) <= 200 else text[:197] + "..."
    return changed


PLUGINS = (RunMetrics,)
