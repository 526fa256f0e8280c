"""Device bugs found on any machine (``debug_device_check``, on by default).

Before the first step, ``train_step`` runs once on the ``meta`` device: parameters, buffers and
the batch are replaced by meta tensors of the first batch's real shapes (so code that hard-codes
the batch size still runs), which costs no compute and no memory. A tensor that the model or
``train_step`` creates on a fixed device (``torch.randn(shape)`` without ``device=``, a plain
tensor attribute that ``model.to(device)`` does not move) is a real tensor among meta ones: the
first op that mixes them is reported with the line that created the tensor and the line that
mixes it. On a GPU that op fails with "Expected all tensors to be on the same device"; on a CPU
machine it would go unnoticed until then. A dry run that cannot finish (code that needs real
values, such as ``.item()``) never stops training; it says why it could not check.
"""

from __future__ import annotations

import traceback

import torch
import torch.fx.experimental._config

from framework import log
from framework.config import Config
from framework.core.events import Event, Order
from framework.core.measurements import PROBE_SESSION
from framework.core.plugin import Plugin, on
from framework.core.state import RunState
from framework.debug.layer_template import DeviceBugError, DeviceCheck, on_meta
from framework.debug.sanity import ModelCheckError, report_findings
from framework.inspection.data_checks import Finding
from framework.inspection.module_tracker import ModuleTracker
from framework.inspection.probe import ProbeLimit, ProbeSession
from framework.inspection.tensors import format_frame, user_frame
from framework.options import register

register(
    "debug_device_check",
    "bool",
    True,
    "Before the first step: a dry run on the meta device finds tensors created on a fixed device (a GPU bug).",
    __name__,
)


def meta_dry_run(state: RunState, session: ProbeSession) -> str | None:
    """Run ``train_step`` on meta tensors shaped like the current batch; the device bug found, if any.

    Raises ``ProbeLimit`` when the dry run could not finish for another reason.
    """
    fake = {}
    for key, t in state.batch.items():
        if key.endswith(":seq_len"):  # real CPU tensors, as the loader delivers them on every device
            fake[key] = t
        else:
            fake[key] = torch.empty_like(t, device="meta")
    # Boolean masks (x[mask]) have data-dependent shapes; assuming every entry is selected keeps the shapes
    # consistent, which is all a device check needs.
    assume_all_selected = torch.fx.experimental._config.patch(meta_nonzero_assume_all_nonzero=True)
    with session.isolated() as model:
        tracker = ModuleTracker(model)
        check = DeviceCheck(tracker)
        for key, t in state.batch.items():
            if key.endswith(":seq_len"):
                check.remember(t, f"as extern_data[{key!r}], whose lengths stay on the CPU (as in RETURNN)")
        try:
            with on_meta(model), tracker, check, assume_all_selected:
                session.changed_run("device check", model, fake)
        except ProbeLimit as exc:
            if isinstance(exc.cause, DeviceBugError):
                return str(exc.cause)
            raise
    return None


class DeviceDryRun(Plugin):
    """Runs the meta dry run before the first step."""

    order = Order.CHECK
    needs = (PROBE_SESSION,)

    @classmethod
    def from_config(cls, config: Config, state: RunState) -> DeviceDryRun | None:
        return cls() if config.bool("debug_device_check") else None

    @on(Event.STEP_START, once=True)
    def dry_run(self, state: RunState) -> None:
        session = state.store.get(PROBE_SESSION)
        if session is None:
            return
        try:
            bug = meta_dry_run(state, session)
        except ProbeLimit as limit:  # code that needs real values cannot run on meta tensors: not a finding
            exc = limit.cause
            where = format_frame(user_frame(traceback.extract_tb(exc.__traceback__)))
            reason = str(exc).splitlines()[0] if str(exc) else ""
            meta_only = isinstance(exc, NotImplementedError) or "meta" in reason
            # An error that the real step raises as well is shown by it, with the user's frames.
            (log.v4 if meta_only else log.v5)(
                f"Device check skipped: the dry run on the meta device {'needs real values' if meta_only else 'failed'} at "
                f"{where} "
                f"({type(exc).__name__}: {reason[:200]}). Training is not affected."
            )
            return
        if bug is not None:
            finding = Finding("warning", f"device bug {bug}")
            report_findings(state, "first step", [finding], ModelCheckError, False, off="debug_device_check = False")


PLUGINS = (DeviceDryRun,)
