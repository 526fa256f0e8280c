"""Pretrained weights that a non-strict load did not load (``debug_weight_loads``, on by default).

Configured against applied, at startup: ``load_state_dict(state, strict=False)`` inside ``get_model`` returns the
keys it could not match and goes on. Fine-tuning uses that on purpose (a new head: its keys missing, the old head's
unexpected), so a mismatch alone is no finding. Two outcomes are never what a load is for, and are warnings: a load
that matched none of the tensors it was given, and one whose unexpected keys are the missing ones behind a common
prefix (a training wrapper's ``model.``, DataParallel's ``module.``): the weights were there under other names, and
the parameters keep their initialisation.
"""

from __future__ import annotations

from framework.base.config import Config
from framework.base.errors import ModelCheckError
from framework.base.findings import Finding
from framework.base.options import register
from framework.check_library.state_loads import StateLoad, loads_of
from framework.check_library.tensors import format_frame
from framework.core.events import Event
from framework.core.plugin import Order, Plugin, on
from framework.core.state import RunState
from framework.debug.sanity import report_findings

register(
    "debug_weight_loads",
    "bool",
    True,
    "At startup: warn when a load_state_dict(..., strict=False) in get_model loaded none of its tensors, or missed "
    "them behind a key prefix (a wrapper's 'model.', DataParallel's 'module.').",
    __name__,
)


class WeightLoads(Plugin):
    """Judges the non-strict loads that ``get_model`` made (``framework.check_library.state_loads``)."""

    bug_check = ("debug_weight_loads",)
    order = Order.CHECK

    @classmethod
    def from_config(cls, config: Config, state: RunState) -> WeightLoads | None:
        return cls() if config.bool("debug_weight_loads") else None

    @on(Event.STARTUP)
    def judge(self, state: RunState) -> None:
        findings = [f for load in loads_of(state.model) if (f := _finding(load)) is not None]
        if findings:
            report_findings(state, "model", findings, ModelCheckError, False, off="debug_weight_loads = False")


def _finding(load: StateLoad) -> Finding | None:
    prefix = load.prefix()
    if load.loaded and prefix is None:
        return None  # a partial load by design (a new head), or keys of another model the user reads back
    where = format_frame(load.frame) if load.frame is not None else "get_model"
    said = (
        f"{load.module_class}.load_state_dict(..., strict=False) loaded {load.loaded} of the {len(load.keys)} tensors"
    )
    said += (
        f" it was given: {len(load.unexpected)} of their keys name nothing in the model (first: {load.unexpected[0]!r})"
        if load.unexpected
        else " it was given: the state dict is empty (a filter by a prefix that no key has?)"
    )
    said += f", and {len(load.missing)} of its parameters and buffers got no value" + (
        f" (first: {load.missing[0]!r})" if load.missing else ""
    )
    if prefix is not None:
        kind, text, count = prefix
        said += (
            f". {count} of the unexpected keys are missing ones with {text!r} in front: the checkpoint was saved from "
            f"a wrapper of this model (a training module's attribute, DataParallel's 'module.')"
            if kind == "extra"
            else f". {count} of the missing keys are unexpected ones with {text!r} in front: the state dict is of "
            f"the submodule {text.rstrip('.')!r}, not of the whole model"
        )
        fix = (
            f"Strip {text!r} from the keys before loading ({{k.removeprefix({text!r}): v ...}})"
            if kind == "extra"
            else f"Load it into model.{text.rstrip('.')} instead"
        ) + ", and read the missing_keys and unexpected_keys that load_state_dict returns."
    else:
        fix = "Load a state dict of this model, and read the missing_keys and unexpected_keys that it returns."
    return Finding(
        "warning",
        "sanity check",
        f"{said}. strict=False hid the mismatch: those parameters keep their initialisation. The call: {where}.",
        evidence={"loaded": load.loaded, "given": len(load.keys), "unexpected": len(load.unexpected)},
        where={"module": load.module_class, "line": where, **({"prefix": prefix[1]} if prefix else {})},
        fix=fix,
    )


PLUGINS = (WeightLoads,)
