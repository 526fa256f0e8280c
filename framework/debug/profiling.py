"""Profiling a window of training steps: ``torch_profile`` (torch.profiler) and ``cprofile`` (cProfile).

``torch_profile = True`` or a dict (``wait``, ``warmup``, ``active`` steps, ``activities``,
``record_shapes``, ``profile_memory``, ``with_stack``) profiles one window of steps and writes a
Chrome/Perfetto trace (``trace.json``, open in ui.perfetto.dev or chrome://tracing), a TensorBoard
trace directory when ``tensorboard_dir`` is set, and prints the top ops. Each step is split into
named regions: ``data``, ``forward``, ``backward``, ``optimizer``.

``cprofile = "run.prof"`` runs Python's cProfile over the training loop only (not imports and
setup); view it with ``snakeviz run.prof``.
"""

from __future__ import annotations

import cProfile
import marshal
import os
import shutil
import socket
import tempfile
import time
from collections.abc import Callable
from typing import Any, BinaryIO

import torch

from framework.base import log
from framework.base.config import Config
from framework.base.disk import write_atomically
from framework.base.options import register
from framework.base.safe_create import make_directory
from framework.core.events import Event, Order
from framework.core.plugin import Plugin, on
from framework.core.state import RunState

register(
    "torch_profile",
    "bool | dict",
    False,
    "Profile a window of steps with torch.profiler: True or {wait, warmup, active, activities, record_shapes, ...}.",
    __name__,
)

register(
    "torch_profile_dir",
    "str | None",
    None,
    "Where torch_profile writes trace.json (None: <model dir>/profile).",
    __name__,
)

register(
    "cprofile",
    "str | None",
    None,
    "Run cProfile over the training loop and write the stats to this file (snakeviz).",
    __name__,
)

_DEFAULTS = {"wait": 1, "warmup": 1, "active": 3, "record_shapes": False, "profile_memory": False, "with_stack": False}


def _device_activities(device: torch.device) -> list[torch.profiler.ProfilerActivity]:
    """The profiler activity of the run's accelerator (CUDA, XPU, MTIA, an out-of-tree backend's PrivateUse1),
    where this torch build can trace it."""
    if device.type == "cpu":
        return []
    name = device.type.upper() if hasattr(torch.profiler.ProfilerActivity, device.type.upper()) else "PrivateUse1"
    activity = getattr(torch.profiler.ProfilerActivity, name, None)
    return [activity] if activity in torch.profiler.supported_activities() else []


def _make_trace_directory(tensorboard_dir: str) -> str:
    """``<tensorboard_dir>/profile``, created with neither it nor ``tensorboard_dir`` a link (refused: PlantedLinkError)."""
    make_directory(tensorboard_dir, "tensorboard_dir")  # first: creating profile/ in a linked one would follow it
    directory = os.path.join(tensorboard_dir, "profile")
    make_directory(directory, "torch_profile's TensorBoard trace directory")
    return directory


def _copy_into(source: str) -> Callable[[BinaryIO], None]:
    """What ``write_atomically`` writes: the bytes of ``source``."""

    def write(file: BinaryIO) -> None:
        with open(source, "rb") as f:
            shutil.copyfileobj(f, file)

    return write


class TorchProfile(Plugin):
    """One torch.profiler window over the first steps after ``wait``."""

    def __init__(self, spec: bool | dict, out_dir: str, tensorboard_dir: str | None, device: torch.device):
        options = dict(_DEFAULTS, **(spec if isinstance(spec, dict) else {}))
        unknown = set(options) - set(_DEFAULTS) - {"activities"}
        if unknown:
            from framework.base.errors import ConfigError

            raise ConfigError(
                f"torch_profile: unknown keys {sorted(unknown)}; allowed: {sorted(_DEFAULTS)} and activities."
            )
        activities = [torch.profiler.ProfilerActivity.CPU, *_device_activities(device)]
        names = options.pop("activities", None)
        if names is not None:
            activities = [getattr(torch.profiler.ProfilerActivity, n.upper()) for n in names]
        self.out_dir = out_dir
        self.tensorboard_dir = tensorboard_dir
        self.steps = options["wait"] + options["warmup"] + options["active"]
        self.profiler = torch.profiler.profile(
            activities=activities,
            schedule=torch.profiler.schedule(
                wait=options["wait"], warmup=options["warmup"], active=options["active"], repeat=1
            ),
            on_trace_ready=self._trace_ready,
            record_shapes=options["record_shapes"],
            profile_memory=options["profile_memory"],
            with_stack=options["with_stack"],
        )
        self.region: Any = None
        self.started = self.done = False

    @classmethod
    def from_config(cls, config: Config, state: RunState) -> TorchProfile | None:
        if not config.get("torch_profile"):
            return None
        model_dir = os.path.dirname(config.get("model") or "") or "."
        out_dir = config.get("torch_profile_dir") or os.path.join(model_dir, "profile")
        tensorboard_dir = config.get("tensorboard_dir") or config.get("tf_log_dir")
        # Before training: a planted link in place of a directory the traces go to stops the run at once.
        make_directory(out_dir, "the directory of torch_profile's trace")
        if tensorboard_dir:
            _make_trace_directory(tensorboard_dir)
        return cls(config.get("torch_profile"), out_dir, tensorboard_dir, state.device)

    @on(Event.STARTUP)
    def start(self, state: RunState) -> None:
        self.profiler.start()
        self.started = True

    @on(Event.STEP_START, Order.LAST)
    def on_step_start(self, state: RunState) -> None:
        self._enter("forward")

    @on(Event.AFTER_FORWARD, Order.FIRST)
    def on_after_forward(self, state: RunState) -> None:
        self._enter("backward")

    @on(Event.AFTER_BACKWARD, Order.FIRST)
    def on_after_backward(self, state: RunState) -> None:
        self._enter("optimizer")

    def _enter(self, name: str) -> None:
        if self.done:
            return
        if self.region is not None:
            self.region.__exit__(None, None, None)
        self.region = torch.profiler.record_function(name)
        self.region.__enter__()

    @on(Event.STEP_END, Order.LAST)
    def on_step_end(self, state: RunState) -> None:
        if self.done:
            return
        self._enter("data")  # until the next step starts: waiting for the next batch
        self.profiler.step()
        if state.global_step >= self.steps:  # global_step counts the steps done
            self.stop(state)

    @on(Event.CLOSE)
    def stop(self, state: RunState) -> None:
        if self.done or not self.started:
            return
        self.done = True
        if self.region is not None:
            self.region.__exit__(None, None, None)
            self.region = None
        self.profiler.stop()

    def _trace_ready(self, profiler: torch.profiler.profile) -> None:
        path = os.path.join(self.out_dir, "trace.json")
        with tempfile.TemporaryDirectory(prefix="torch-profile-") as private:
            # torch writes the trace by name, and once: into a directory only this process writes, then copied into
            # files created without following a link.
            trace = os.path.join(private, "trace.json")
            profiler.export_chrome_trace(trace)
            make_directory(self.out_dir, "the directory of torch_profile's trace")
            advice = "Free some space or point torch_profile_dir elsewhere."
            write_atomically(path, _copy_into(trace), "torch_profile's trace", advice)
            if self.tensorboard_dir:  # named like torch.profiler.tensorboard_trace_handler's files, for its plugin
                directory = _make_trace_directory(self.tensorboard_dir)
                name = f"{socket.gethostname()}_{os.getpid()}.{time.time_ns()}.pt.trace.json"
                advice = "Free some space or point tensorboard_dir elsewhere."
                write_atomically(os.path.join(directory, name), _copy_into(trace), "a TensorBoard trace", advice)
        table = profiler.key_averages().table(sort_by="self_cpu_time_total", row_limit=15)
        log.v3(
            f"torch_profile: wrote {path} (open in ui.perfetto.dev or chrome://tracing)"
            + (f" and a TensorBoard trace in {self.tensorboard_dir}/profile" if self.tensorboard_dir else "")
            + f". Top ops by self CPU time:\n{table}"
        )


class CProfile(Plugin):
    """``cprofile = path``: cProfile over the training loop."""

    after = ("*",)  # profiles the run, not the other plugins' startup work; stops once they closed
    before = ("Preemption",)  # whose requeue may end the process at CLOSE

    def __init__(self, path: str):
        self.path = path
        self.profiler = cProfile.Profile()

    @classmethod
    def from_config(cls, config: Config, state: RunState) -> CProfile | None:
        return cls(config.get("cprofile")) if config.get("cprofile") else None

    @on(Event.STARTUP)
    def start(self, state: RunState) -> None:
        self.profiler.enable()

    @on(Event.CLOSE)
    def write(self, state: RunState) -> None:
        self.profiler.disable()
        self.profiler.create_stats()  # what dump_stats writes, into a file created without following a link
        advice = "Free some space or point cprofile elsewhere."
        write_atomically(self.path, lambda f: marshal.dump(self.profiler.stats, f), "the cprofile stats", advice)
        log.v3(f"cprofile: wrote {self.path}; view it with: snakeviz {self.path}")


PLUGINS = (TorchProfile, CProfile)
