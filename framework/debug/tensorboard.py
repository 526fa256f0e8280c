"""TensorBoard: ``tensorboard_dir`` (RETURNN: ``tf_log_dir``).

Per step (every ``tensorboard_log_interval`` steps): every marked loss, the learning rate, the
step time, the process RSS, and the global gradient norm when gradient clipping computes it.
Per epoch: the train and dev scores. ``debug_grad_summaries``: histograms of parameters and
gradients and per-parameter gradient norms every N steps. The model graph once, traced with the
first batch (a warning, not a crash, when tracing fails). At the end: hparams (the config's
scalar options) with the final scores. ``run_ctx.log_image`` / ``run_ctx.log_scalar`` from a
config's step functions.
"""

from __future__ import annotations

import contextlib
import io
import time
import warnings
from typing import Any

import torch

from framework import log
from framework.debug.memory import rss
from framework.debug.tensorboard_writer import TensorBoardWriterProcess
from framework.events import Event
from framework.rng import get_rng_state, set_rng_state
from framework.scores import step_values


class TensorBoardLogger:
    """Writes the run's summaries with ``torch.utils.tensorboard.SummaryWriter``."""

    def __init__(self, log_dir: str, interval: int, grad_summaries: int | None):
        self.log_dir = log_dir
        self.writer = TensorBoardWriterProcess(log_dir)
        self.interval = max(1, interval)
        self.grad_summaries = grad_summaries
        self.step_start = 0.0
        self.graph_done = False

    def install(self, engine: Any) -> None:
        """Subscribe to the engine's events and become the run contexts' summary sink."""
        callbacks = engine.callbacks
        engine.summaries = self
        callbacks.on(Event.STEP_START, self.on_step_start)
        callbacks.on(Event.STEP_END, self.on_step_end)
        callbacks.on(Event.EPOCH_END, self.on_epoch_end)
        callbacks.on(Event.FINISH, self.on_finish)
        callbacks.on(Event.EXCEPTION, lambda engine: self.writer.close())  # keep what was logged until the error
        if self.grad_summaries:
            callbacks.on(Event.BEFORE_OPTIMIZER_STEP, self.on_gradients)

    # -- the sink run_ctx.log_image / log_scalar write to
    def image(self, tag: str, image: torch.Tensor, step: int, dataformats: str) -> None:
        self.writer.call("add_image", tag, image.detach().cpu().numpy(), step, dataformats=dataformats)

    def scalar(self, tag: str, value: float, step: int) -> None:
        self.writer.scalars(step, [(tag, value)])

    def scalars(self, step: int, values: list[tuple[str, float]]) -> None:
        self.writer.scalars(step, values)

    # -- engine events
    def on_step_start(self, engine: Any) -> None:
        self.step_start = time.perf_counter()
        if not self.graph_done:
            self.graph_done = True
            self._add_graph(engine)

    def _add_graph(self, engine: Any) -> None:
        keys = [k for k, d in engine.extern_data.items() if d.available_for_inference]
        attempts = [keys[:1], keys] if len(keys) > 1 else [keys]
        problem = ""
        from torch.utils.tensorboard import SummaryWriter

        rng = get_rng_state()  # tracing runs the model (dropout, sampling): training must not notice
        try:
            for names in attempts:  # model(first input), then model(*all inputs)
                args = tuple(engine.batch[k] for k in names)
                try:  # once per run: its own event file, written from here because tracing needs the model
                    # torch warns when a random model's trace check differs and prints when tracing fails
                    with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()):
                        warnings.simplefilter("ignore")
                        with SummaryWriter(self.log_dir) as graph_writer:
                            graph_writer.add_graph(
                                engine.model, args[0] if len(args) == 1 else args, use_strict_trace=False
                            )
                    return
                except Exception as exc:  # a model that does not take the batch tensors as arguments
                    problem = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
        finally:
            set_rng_state(rng)
        tried = " and ".join(f"model({', '.join(names)})" for names in attempts)
        log.v2(
            f"TensorBoard: could not trace the model graph with the first batch (tried {tried}): {problem}. "
            f"The graph is skipped; everything else is logged."
        )

    def on_step_end(self, engine: Any) -> None:
        step = engine.run_ctx.step  # the index of the step that just ended
        if step % self.interval:
            return
        values = [(f"train/{name}", value) for name, value in step_values(engine.run_ctx).items()]
        values.append(("train/learning_rate", engine.optimizer.param_groups[0]["lr"]))
        values.append(("train/step_time_sec", time.perf_counter() - self.step_start))
        if step % (10 * self.interval) == 0:  # memory changes slowly; reading RSS costs ~20 us
            values.append(("memory/rss_mb", rss() / 1024**2))
            if engine.device.type == "cuda":
                values.append(("memory/cuda_allocated_mb", torch.cuda.memory_allocated(engine.device) / 1024**2))
        if engine.grad_norm is not None:
            values.append(("train/grad_norm", float(engine.grad_norm)))
        self.writer.scalars(step, values)

    def on_gradients(self, engine: Any) -> None:
        if engine.global_step % self.grad_summaries:
            return
        step = engine.global_step
        norms = []
        values = []
        for name, param in engine.model.named_parameters():
            self.writer.call("add_histogram", f"params/{name}", param.detach().cpu().numpy(), step)
            if param.grad is not None:
                self.writer.call("add_histogram", f"grads/{name}", param.grad.detach().cpu().numpy(), step)
                norm = torch.linalg.vector_norm(param.grad.detach()).item()
                values.append((f"grad_norm/{name}", norm))
                norms.append(norm)
        if norms:
            values.append(("grad_norm/global", sum(n * n for n in norms) ** 0.5))
        self.writer.scalars(step, values)

    def on_epoch_end(self, engine: Any) -> None:
        values = []
        for key, value in engine.lr_control.scores.get(engine.epoch, {}).items():
            dataset, _, name = key.partition("_")
            values.append((f"epoch/{dataset}/{name}", value))
        values.append(("epoch/learning_rate", engine.learning_rate))
        self.writer.scalars(engine.epoch, values)
        self.writer.flush()

    def on_finish(self, engine: Any) -> None:
        final = engine.lr_control.scores.get(engine.epoch, {})
        self.writer.call(
            "add_hparams",
            scalar_options(engine.config),
            {f"hparam/{k}": v for k, v in final.items()},
            run_name="hparams",
        )
        self.writer.close()


def scalar_options(config: Any) -> dict[str, Any]:
    """The config's options and helper variables with scalar values (numbers, strings, bools)."""
    values = {}
    for name, value in config.namespace.items():
        if name.startswith("_") or name == "config":
            continue
        if isinstance(value, (bool, int, float, str)):
            values[name] = value
    for name in ("learning_rate", "batch_size", "num_epochs", "random_seed"):
        values.setdefault(name, config.get(name))
    return values
