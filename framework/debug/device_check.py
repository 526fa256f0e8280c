"""Device bugs found on any machine (``debug_device_check``, on by default).

The first-step probe session runs ``train_step`` once on the unchanged first batch, on a copy of
the model, for all checks (``framework.check_library.probe``); this check watches that run with a
torch function mode (``framework.check_library.device_tracking``) and costs no run of its own. The
mode follows where each tensor would live on a GPU: the parameters, buffers and batch, and what
is computed from them, on the model's device; a tensor made without ``device=``
(``torch.randn(shape)``), moved by ``.cpu()``, a plain tensor attribute (of a module class the user wrote: a
library's modules move theirs on their first call) that ``model.to(device)``
does not move, a global tensor of the config, or the ``:seq_len`` lengths, on the CPU. The first
op that mixes the two is reported with the line that made the CPU tensor and the line that mixes
it. On a GPU that op fails with "Expected all tensors to be on the same device"; on a CPU
machine, where every tensor is on the CPU, only this tracking sees it. The run has real values,
so code that needs them (``.item()``, data-dependent masks, as in Hugging Face models) runs as in
training.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import torch

from framework.base import log
from framework.base.config import Config
from framework.base.errors import ModelCheckError
from framework.base.findings import Finding
from framework.base.options import register
from framework.check_library.device_tracking import DeviceTracker
from framework.check_library.module_tracker import ModuleTracker
from framework.check_library.probe import ProbeLimit
from framework.core.run_ctx import RunCtx
from framework.core.state import RunState
from framework.debug.first_step import SharedRunCheck
from framework.debug.sanity import report_findings

CHECK = "device check"

register(
    "debug_device_check",
    "bool",
    True,
    "Before the first step: find tensors created on a fixed device (a GPU bug) by tracking, in the first-step checks' "
    "run of the first batch, which tensors would be on the model's device.",
    __name__,
)


class DeviceWatch(SharedRunCheck):
    """Watches the probe session's run of the unchanged first batch and reports the first device mix."""

    bug_check = ("debug_device_check",)
    check = CHECK

    def __init__(self) -> None:
        self.devices: DeviceTracker | None = None
        self.reported = False

    @classmethod
    def from_config(cls, config: Config, state: RunState) -> DeviceWatch | None:
        return cls() if config.bool("debug_device_check") else None

    @contextlib.contextmanager
    def observe(self, state: RunState, model: torch.nn.Module) -> Iterator[DeviceTracker]:
        tracker = ModuleTracker(model)
        self.devices = DeviceTracker(model, state.batch, tracker, state.config.namespace)
        try:
            with tracker, self.devices:
                yield self.devices
        except Exception:
            self._report(state)  # on a GPU the mixing op fails: name it before the error propagates
            raise

    def skipped(self, state: RunState, limit: ProbeLimit) -> None:
        if self.devices is None or self.devices.finding is None:
            log.v5(f"Device check skipped: the run of the first batch failed ({limit}).")
            return
        self.conclude(state, self.devices, None)  # the run failed at the device mix it found

    def conclude(self, state: RunState, seen: DeviceTracker, run_ctx: RunCtx | None) -> None:
        if seen.finding is None and seen.broken is not None:
            log.v5(f"Device check stopped early: its tracking failed ({seen.broken}). Training is not affected.")
        self._report(state)
        self.devices = None

    def _report(self, state: RunState) -> None:
        if self.devices is None or self.devices.finding is None or self.reported:
            return
        self.reported = True
        finding = Finding(
            "warning",
            "sanity check",
            f"device bug {self.devices.finding}",
            evidence=self.devices.evidence,
            where=self.devices.where,
            fix="Create or move the tensor on the input's device (device=x.device, .to(x.device), or "
            "torch.randn_like(x) / x.new_zeros(...)).",
        )
        report_findings(state, "first step", [finding], ModelCheckError, False, off="debug_device_check = False")


PLUGINS = (DeviceWatch,)
