"""The Finding record: everything any check reports, in one shape, sent one way.

A check builds a :class:`Finding` and calls :func:`report`. The reporter writes the log line (the
wording ``SEVERITY check: message``) and hands the record to every registered sink (the findings
file, TensorBoard, the end-of-run summary, ...). Sinks are added by the layers above: this module
sits in the bottom layer and knows none of them.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

from framework import log

SEVERITIES = ("note", "warning", "error")


@dataclasses.dataclass
class Finding:
    """One thing a check found.

    ``severity``: "error" (training cannot work like this), "warning" (a user should act on it) or
    "note" (a fact worth knowing that is often fine). ``check`` names the check (as in the log line),
    ``message`` says the cause in one or a few sentences, ``evidence`` holds the numbers behind it,
    ``where`` the culprit (module path, parameter, op, ``file:line``, batch entry), ``epoch`` and
    ``step`` (the global step) when it was found, ``fix`` what to do, ``option`` the option setting
    that turns the check off.
    """

    severity: str
    check: str
    message: str
    evidence: dict[str, Any] = dataclasses.field(default_factory=dict)
    where: dict[str, Any] = dataclasses.field(default_factory=dict)
    epoch: int | None = None
    step: int | None = None
    fix: str = ""
    option: str = ""

    def __post_init__(self) -> None:
        if self.severity not in SEVERITIES:
            raise ValueError(f"Finding severity {self.severity!r} is not one of {SEVERITIES}")

    @property
    def severe(self) -> bool:
        return self.severity == "error"

    def line(self) -> str:
        """The log line: ``WARNING check: message`` (a note reads ``Note check: message``)."""
        label = "Note" if self.severity == "note" else self.severity.upper()
        return f"{label} {self.check}: {self.message}"

    def as_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


Sink = Callable[[Finding], None]
_sinks: list[Sink] = []


def add_sink(sink: Sink) -> None:
    """Send every finding reported from now on to ``sink`` too (remove it with :func:`remove_sink`)."""
    _sinks.append(sink)


def remove_sink(sink: Sink) -> None:
    if sink in _sinks:
        _sinks.remove(sink)


def report(finding: Finding, verbosity: int | None = None) -> Finding:
    """Log ``finding`` (warnings and errors at verbosity 2, notes at 3 unless ``verbosity`` says otherwise)
    and hand it to every sink. Returns the finding."""
    log.v(verbosity if verbosity is not None else (3 if finding.severity == "note" else 2), finding.line())
    for sink in list(_sinks):
        sink(finding)
    return finding
