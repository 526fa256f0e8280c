"""Per-step fingerprints of a training run (``debug_fingerprint_file``), for tools/check-determinism.py.

For each of the first ``debug_fingerprint_steps`` steps, in the order things happen: a hash of
every batch key, of every module output (module path and call number, in execution order), of
every gradient after backward and of every parameter after the step, each with shape, dtype,
mean and max |x| to show how far apart two runs are. One JSON line per step; training ends
after the last fingerprinted step. Hashes are of the exact bytes, so any difference counts.
"""

from __future__ import annotations

import hashlib
import json
import os
from typing import Any, TextIO

import torch

from framework.base import log
from framework.base.config import Config
from framework.base.options import register
from framework.base.safe_create import open_kept
from framework.check_library.module_tracker import ModuleTracker
from framework.check_library.sharded import full
from framework.check_library.tensors import iter_tensors
from framework.core.events import Event, Order, StopTraining
from framework.core.plugin import Plugin, on
from framework.core.state import RunState

register(
    "debug_fingerprint_file",
    "str | None",
    None,
    "Write per-step hashes of batch, module outputs, gradients and parameters here (framework-check-determinism).",
    __name__,
)

register(
    "debug_fingerprint_steps", "int", 5, "Steps to fingerprint; training ends after them.", __name__, range="[1, inf)"
)


def fingerprint(kind: str, name: str, t: torch.Tensor) -> list[Any]:
    """``[kind, name, hash, shape, dtype, mean, max |x|]`` of a tensor (of the whole tensor under FSDP: gathered
    from every rank, which all fingerprint the same tensors in the same order)."""
    t = full(t.detach())
    data = t.cpu().contiguous()
    digest = hashlib.blake2b(data.reshape(-1).view(torch.uint8).numpy().tobytes(), digest_size=8).hexdigest()
    values = data.double() if not data.is_complex() else data.abs().double()
    mean, absmax = (float(values.mean()), float(values.abs().max())) if data.numel() else (0.0, 0.0)
    return [kind, name, digest, list(t.shape), str(t.dtype).removeprefix("torch."), mean, absmax]


class Fingerprints(Plugin):
    """Records the fingerprints of each step and writes them as JSON lines."""

    # tracks the step as the model runs it: compiled, with the other diagnostics' hooks in place
    after = ("Compile", "LayerShapes", "NumericsGuard", "SanityCheck")

    def __init__(self, path: str, steps: int, file: TextIO):
        self.path, self.file = path, file
        self.steps = steps
        self.entries: list[list[Any]] = []
        self.calls: dict[str, int] = {}
        self.tracker: ModuleTracker | None = None
        self.done = 0

    @classmethod
    def from_config(cls, config: Config, state: RunState) -> Fingerprints | None:
        path = config.get("debug_fingerprint_file")
        if not path:
            return None
        fd = open_kept(path, "debug_fingerprint_file", os.O_WRONLY)  # never through a planted link
        os.ftruncate(fd, 0)  # a rerun starts a fresh file (truncated after the checks: not another name's content)
        return cls(path, config.int("debug_fingerprint_steps"), os.fdopen(fd, "w", encoding="utf-8"))

    @on(Event.STEP_START, Order.LAST)
    def on_step_start(self, state: RunState) -> None:
        self.entries = [fingerprint("batch key", repr(key), t) for key, t in state.batch.items()]
        self.calls = {}
        self.tracker = ModuleTracker(state.model, post_hook=self._on_module_output).__enter__()

    def _on_module_output(self, name: str, module: Any, args: tuple, output: Any) -> None:
        call = self.calls[name] = self.calls.get(name, 0) + 1
        label = f"'{name}' ({type(module).__name__})" + (f" call {call}" if call > 1 else "")
        for i, t in enumerate(iter_tensors(output)):
            self.entries.append(fingerprint("module output", label + (f" output {i}" if i else ""), t))

    @on(Event.AFTER_FORWARD)
    @on(Event.EXCEPTION)
    @on(Event.CLOSE)
    def stop_tracking(self, state: RunState) -> None:
        if self.tracker is not None:
            self.tracker.__exit__(None, None, None)
            self.tracker = None

    @on(Event.CLOSE)
    def close_file(self, state: RunState) -> None:
        self.file.close()

    @on(Event.AFTER_BACKWARD)
    def on_after_backward(self, state: RunState) -> None:
        for name, p in state.model.named_parameters():
            if p.grad is not None:
                self.entries.append(fingerprint("gradient", repr(name), p.grad))

    @on(Event.STEP_END)
    def on_step_end(self, state: RunState) -> None:
        self.entries += [fingerprint("parameter", repr(name), p) for name, p in state.model.named_parameters()]
        self.file.write(json.dumps({"step": state.global_step - 1, "entries": self.entries}) + "\n")
        self.file.flush()
        self.done += 1
        if self.done >= self.steps:
            log.v4(f"Fingerprints of {self.done} steps written to {self.path}")
            raise StopTraining(f"debug_fingerprint_steps: {self.done} steps fingerprinted into {self.path}")


PLUGINS = (Fingerprints,)
