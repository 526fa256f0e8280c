"""TensorBoard: ``tensorboard_dir`` (RETURNN: ``tf_log_dir``).

Per step (every ``tensorboard_log_interval`` steps): every marked loss, the learning rate, the
step time, the process RSS, and the global gradient norm when gradient clipping computes it. The
values computed on the device stay there until a flush (every 100 records, 10 seconds, and at
the end of each epoch) copies them all at once, so logging adds no host sync per step.
Per epoch: the train and dev scores, under ``epoch/`` at the epoch number and under ``scores/`` at the
global step, where they overlay the per-step ``train/`` curves. Each finding: a text entry under
``findings/<check>`` and the counts of findings by severity (``findings/warning``, ...) at its step. ``debug_grad_summaries``: histograms of parameters and
gradients and per-parameter gradient norms every N steps. The model graph once, traced with the
first batch (a warning, not a crash, when tracing fails). At the end: hparams (the config's
scalar options) with the final scores. ``run_ctx.log_image`` / ``run_ctx.log_scalar`` from a
config's step functions.
"""

from __future__ import annotations

import os
import socket
import time
from typing import Any

import torch

from framework.base import findings, log
from framework.base.accelerator import memory_allocated
from framework.base.config import Config
from framework.base.disk import probe_directory
from framework.base.findings import Finding
from framework.base.options import register
from framework.base.safe_create import make_directory
from framework.check_library.probe import model_copy, unseen
from framework.core.events import Event, Order
from framework.core.plugin import Plugin, on
from framework.core.scores import step_losses
from framework.core.state import RunState
from framework.debug.memory import rss
from framework.debug.tensorboard_writer import TensorBoardWriterProcess, unguessable_suffix
from framework.training.clipping import GRAD_NORM
from framework.training.optim import base_learning_rate

register(
    "tensorboard_dir",
    "str | None",
    None,
    "Write TensorBoard summaries (scalars, graph, hparams, images) here.",
    __name__,
)

register("tf_log_dir", "str | None", None, "RETURNN's name for tensorboard_dir.", __name__)

register(
    "use_tensorboard",
    "bool",
    False,
    "RETURNN's switch: TensorBoard files in runs/<date>_<host> (torch's SummaryWriter default), unless "
    "tensorboard_dir names a directory.",
    __name__,
)

register(
    "tensorboard_opts",
    "dict",
    {},
    "RETURNN's TensorBoard options: {'log_every_n_train_steps': N} (default 100 with use_tensorboard).",
    __name__,
)

register(
    "tensorboard_log_interval",
    "int",
    1,
    "Steps between two per-step TensorBoard scalar writes.",
    __name__,
    range="[1, inf)",
)

register(
    "debug_grad_summaries",
    "bool | int",
    False,
    "Histograms of parameters and gradients and per-parameter gradient norms in TensorBoard every N steps.",
    __name__,
    range="[0, inf)",
    true_means=100,
)


_FLUSH_RECORDS, _FLUSH_SEC = 100, 10.0
HPARAMS_RUN = "hparams"  # the subdirectory (a TensorBoard run of its own) of the final scores with the options


class TensorBoardLogger(Plugin):
    """Sends the run's summaries to the TensorBoard writer process (rank 0 only); the model graph is written here."""

    needs = (GRAD_NORM,)

    def __init__(self, log_dir: str, interval: int, grad_summaries: int | None):
        self.log_dir = log_dir
        self.writer = TensorBoardWriterProcess(log_dir)
        self.interval = max(1, interval)
        self.grad_summaries = grad_summaries
        self.step_start = 0.0
        self.graph_done = False
        # Per-step records whose device values are not read yet: (step, host values, names, device values).
        self.records: list[tuple[int, list[tuple[str, float]], list[str], torch.Tensor]] = []
        self.last_flush = time.monotonic()
        self.finding_counts: dict[str, int] = {}

    @classmethod
    def from_config(cls, config: Config, state: RunState) -> TensorBoardLogger | None:
        log_dir = config.get("tensorboard_dir") or config.get("tf_log_dir")
        interval = config.int("tensorboard_log_interval")
        if not log_dir and config.bool("use_tensorboard"):  # RETURNN: SummaryWriter() in its default directory
            log_dir = os.path.join("runs", f"{time.strftime('%b%d_%H-%M-%S')}_{socket.gethostname()}")
            if not config.has("tensorboard_log_interval"):
                interval = int(config.get("tensorboard_opts").get("log_every_n_train_steps", 100))
        if not log_dir or (state.distributed is not None and state.distributed.rank != 0):
            return None
        make_directory(log_dir, "tensorboard_dir")  # a link in its place would put the event files elsewhere
        # Written at the end of the run: a link planted there stops the run now, not after training.
        make_directory(os.path.join(log_dir, HPARAMS_RUN), "the TensorBoard hparams run")
        probe_directory(log_dir, "TensorBoard directory", "tensorboard_dir")
        return cls(log_dir, interval, config.int_or_off("debug_grad_summaries"))

    @on(Event.STARTUP, Order.FIRST)
    def become_sink(self, state: RunState) -> None:
        """Where run_ctx.log_image / log_scalar, diagnostics' scalars and the findings go."""
        state.control.send_summaries_to(self)
        findings.add_sink(self.finding)

    @on(Event.CLOSE)
    def close(self, state: RunState) -> None:
        """Flush and close the writer process, however the run ended (what was logged is kept)."""
        findings.remove_sink(self.finding)
        state.control.send_summaries_to(None)
        self._write_records()
        self.writer.close()

    def finding(self, finding: Finding) -> None:
        """A finding: its text under ``findings/<check>``, the counts by severity so far as scalars."""
        step = finding.step or 0
        self.finding_counts[finding.severity] = self.finding_counts.get(finding.severity, 0) + 1
        text = f"**{finding.severity}** (epoch {finding.epoch}, step {step}): {finding.message}"
        if finding.evidence:
            text += f"\n\nevidence: `{finding.evidence}`"
        self.writer.add("text", f"findings/{finding.check}", text, step)
        self.writer.scalars(step, [(f"findings/{s}", float(n)) for s, n in self.finding_counts.items()])

    # -- the sink run_ctx.log_image / log_scalar write to
    def image(self, tag: str, image: torch.Tensor, step: int, dataformats: str) -> None:
        from framework.debug.tensorboard_summaries import check_image

        check_image(tuple(image.shape), dataformats)  # a mistake raised at the user's log_image, not in the writer
        self.writer.add("image", tag, _numpy(image), step, dataformats=dataformats)

    def scalar(self, tag: str, value: float, step: int) -> None:
        self.writer.scalars(step, [(tag, value)])

    def scalars(self, step: int, values: list[tuple[str, float]]) -> None:
        self.writer.scalars(step, values)

    # -- engine events
    @on(Event.STEP_START)
    def on_step_start(self, state: RunState) -> None:
        self.step_start = time.perf_counter()
        if not self.graph_done:
            self.graph_done = True
            self._add_graph(state)

    def _add_graph(self, state: RunState) -> None:
        keys = [k for k, d in state.extern_data.items() if d.available_for_inference]
        attempts = [keys[:1], keys] if len(keys) > 1 else [keys]
        problem = ""
        from torch.utils.tensorboard import SummaryWriter

        for names in attempts:  # model(first input), then model(*all inputs)
            args = tuple(state.batch[k] for k in names)
            try:  # once per run: its own event file, written from here because tracing needs the model
                # Tracing runs the model: on a copy, with the RNG states kept and what the model, torch's tracer
                # and libraries print, log or warn swallowed (the probe session's isolation), so the run sees nothing.
                with unseen(), SummaryWriter(self.log_dir, filename_suffix=unguessable_suffix()) as graph_writer:
                    graph_writer.add_graph(
                        model_copy(state.model), args[0] if len(args) == 1 else args, use_strict_trace=False
                    )
                return
            except Exception as exc:  # a model that does not take the batch tensors as arguments
                problem = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
        tried = " and ".join(f"model({', '.join(names)})" for names in attempts)
        # Not a problem of the run (many models take a dict or keywords): a detail, not a warning.
        log.v5(
            f"TensorBoard: no model graph: tracing with the first batch failed (tried {tried}): {problem}. "
            f"Everything else is logged."
        )

    @on(Event.STEP_END)
    def on_step_end(self, state: RunState) -> None:
        step = state.run_ctx.step  # the index of the step that just ended
        if step % self.interval:
            return
        host = [
            ("train/learning_rate", base_learning_rate(state.optimizer)),
            ("train/step_time_sec", time.perf_counter() - self.step_start),
        ]
        if step % (10 * self.interval) == 0:  # memory changes slowly; reading RSS costs ~20 us
            host.append(("memory/rss_mb", rss() / 1024**2))
            allocated = memory_allocated(state.device)  # None: the backend keeps no statistics (RSS above)
            if allocated is not None:
                host.append((f"memory/{state.device.type}_allocated_mb", allocated / 1024**2))
        device = [(f"train/{name}", value) for name, value in step_losses(state.run_ctx).items()]
        grad_norm = state.store.get(GRAD_NORM)
        if grad_norm is not None and grad_norm[0] == step:  # clipped at this step's update
            device.append(("train/grad_norm", grad_norm[1].detach()))
        values = torch.stack([v.float() for _, v in device]) if device else torch.zeros(0)
        self.records.append((step, host, [name for name, _ in device], values))
        if len(self.records) >= _FLUSH_RECORDS or time.monotonic() - self.last_flush > _FLUSH_SEC:
            self._write_records()

    def _write_records(self) -> None:
        """Read the buffered device values with one copy and hand every record to the writer."""
        records, self.records, self.last_flush = self.records, [], time.monotonic()
        if not records:
            return
        read = torch.cat([values for *_, values in records]).tolist()
        offset = 0
        for step, host, names, _ in records:
            self.writer.scalars(step, list(zip(names, read[offset : offset + len(names)], strict=True)) + host)
            offset += len(names)

    @on(Event.BEFORE_OPTIMIZER_STEP)
    def on_gradients(self, state: RunState) -> None:
        if not self.grad_summaries or state.global_step % self.grad_summaries:
            return
        step = state.global_step
        norms = []
        values = []
        for name, param in state.model.named_parameters():
            self.writer.add("histogram", f"params/{name}", _numpy(param), step)
            if param.grad is not None:
                self.writer.add("histogram", f"grads/{name}", _numpy(param.grad), step)
                norm = torch.linalg.vector_norm(param.grad.detach()).item()
                values.append((f"grad_norm/{name}", norm))
                norms.append(norm)
        if norms:
            values.append(("grad_norm/global", sum(n * n for n in norms) ** 0.5))
        self.writer.scalars(step, values)

    @on(Event.EPOCH_END)
    def on_epoch_end(self, state: RunState) -> None:
        self._write_records()
        scores = state.lr_control.scores.get(state.epoch, {})
        values = [(f"epoch/{dataset}/{name}", v) for dataset, losses in scores.items() for name, v in losses.items()]
        values.append(("epoch/learning_rate", base_learning_rate(state.optimizer)))  # applied, not configured
        self.writer.scalars(state.epoch, values)
        at_step = [(f"scores/{dataset}/{name}", v) for dataset, losses in scores.items() for name, v in losses.items()]
        self.writer.scalars(state.global_step, at_step)  # beside the per-step train/ curves on one step axis
        self.writer.flush()

    @on(Event.FINISH)
    def on_finish(self, state: RunState) -> None:
        final = state.lr_control.scores.get(state.epoch, {})
        self.writer.hparams(
            scalar_options(state.config),
            {f"hparam/{dataset}_{name}": v for dataset, losses in final.items() for name, v in losses.items()},
            HPARAMS_RUN,
        )


def _numpy(tensor: torch.Tensor) -> Any:
    """A tensor's values for the writer process, which works on numpy arrays (numpy has no bfloat16)."""
    tensor = tensor.detach().cpu()
    return (tensor.float() if tensor.dtype == torch.bfloat16 else tensor).numpy()


def scalar_options(config: Any) -> dict[str, Any]:
    """The config's options and helper variables with scalar values (numbers, strings, bools)."""
    values = {}
    for name, value in config.namespace.items():
        if name.startswith("_") or name == "config":
            continue
        if isinstance(value, (bool, int, float, str)):
            values[name] = value
    for name in ("learning_rate", "batch_size", "num_epochs", "random_seed"):
        value = config.get(name)
        values.setdefault(name, value if isinstance(value, (bool, int, float, str)) else repr(value))
    return values


PLUGINS = (TensorBoardLogger,)
