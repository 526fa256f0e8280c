"""The failure of a run as a finding: severity error, check "run failed", so that ``findings.jsonl``, the
summary and ``report.html`` all say the run failed and where.

``where`` is what the error names (``FrameworkError.where``: the NaN replay's module, op and line); for an
exception of the user's code or of a library, the innermost frame of the user's code in the traceback (``file:line``,
function and statement).
"""

from __future__ import annotations

import os
import traceback
from typing import Any

from framework.base import findings, log
from framework.base.config import Config
from framework.base.errors import FrameworkError
from framework.base.findings import Finding
from framework.core.state import RunState

CHECK = "run failed"
_FRAMEWORK_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep


def failure_finding(exc: BaseException, epoch: int, global_step: int) -> Finding:
    """The finding of a run that ``exc`` ended at ``epoch`` and ``global_step``."""
    text = str(exc).strip()
    first = text.split("\n", 1)[0]
    own = isinstance(exc, FrameworkError)  # says what is wrong in its message: no frame of the framework is the culprit
    where = getattr(exc, "where", None) or ({} if own else _innermost_user_frame(exc))
    evidence: dict[str, Any] = {"exception": type(exc).__name__}
    if "\n" in text:
        evidence["report"] = text[:4000]
    culprit = ", ".join(f"{key} {where[key]}" for key in ("module", "op", "line", "parameter") if where.get(key))
    at = f" in {culprit}" if culprit else ""
    return Finding(
        "error",
        CHECK,
        f"The run failed at epoch {epoch}, global step {global_step}{at}: {type(exc).__name__}: {first}",
        evidence=evidence,
        where=where,
        epoch=epoch,
        step=global_step,
        fix="" if own else "The traceback in the log shows the frames; fix the code at 'where', then run again.",
    )


def _innermost_user_frame(exc: BaseException) -> dict[str, Any]:
    """``file:line`` and function of the innermost frame outside the framework and installed packages (or the
    innermost frame at all)."""
    frames = traceback.extract_tb(exc.__traceback__)
    if not frames:
        return {}
    user = [f for f in frames if not f.filename.startswith(_FRAMEWORK_DIR) and "-packages" + os.sep not in f.filename]
    frame = (user or frames)[-1]
    found = {"line": f"{frame.filename}:{frame.lineno}", "function": frame.name}
    if frame.line:
        found["code"] = frame.line
    return found


def report_failure(config: Config, state: RunState, exc: Exception) -> None:
    """The failure as a finding of severity error (not logged again: the error is printed as the run ends); a
    refusal to start (a config error, exit 2, before the first step: the plugins' startup refuses files and values
    too) is no finding, so that a refused run writes nothing; neither is the failure of a run whose model directory
    was removed (writing the finding would create it again)."""
    if isinstance(exc, FrameworkError) and exc.exit_code == 2 and state.global_step == 0:
        return
    prefix = config.get("model")
    if prefix and not os.path.isdir(os.path.dirname(os.path.abspath(prefix))):
        return
    try:
        finding = failure_finding(exc, state.epoch, state.global_step)
    except Exception as broken:  # e.g. an exception whose __str__ raises: the run's own error must go on unchanged
        log.v4(f"The failure of the run is no finding: describing it raised {type(broken).__name__}: {broken}")
        return
    findings.report(finding, verbosity=5)
