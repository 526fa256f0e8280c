"""The Finding record: everything any check reports, in one shape, sent one way.

A check builds a :class:`Finding` and calls :func:`report`. The reporter fills in when it was found
(the epoch and global step of the run, through the clock the run sets), writes the log line (the
wording ``SEVERITY check: message``) and hands the record to every registered sink (the findings
file, TensorBoard, the end-of-run summary, ...). Sinks and the clock are added by the layers above:
this module sits in the bottom layer and knows none of them.

A judgement that the run later contradicts (a task at its chance level for an epoch that then learns) is
withdrawn, never deleted: :func:`withdraw` reports a later record that carries the withdrawn finding's ``id``
in ``withdraws`` and says why; the file keeps both, and whoever reads the findings (the run summary, the
report, the fail level) takes :func:`standing` ones and shows the withdrawn ones as withdrawn.

One problem is one record, whichever checks find it: a check that knows the cause it reports names it in
``evidence["problem"]`` (a key shared by the checks that can find it, such as ``no loss marked for optimizer
'critic'``). Within a run, a later finding of a problem already reported is folded into the first: the reporter
logs it and hands it to the sinks as always (the log shows what each check saw, when it saw it), marks it
``same_as`` the first record's ``id`` and lists its check in the first one's ``evidence["also_reported_by"]``;
:func:`standing` leaves it out (unless the first was withdrawn), so the summary, the report and the fail level count
the problem once.
"""

from __future__ import annotations

import dataclasses
import json
import uuid
from collections.abc import Callable
from typing import Any

from framework.base import log

SEVERITIES = ("note", "warning", "error")


@dataclasses.dataclass
class Finding:
    """One thing a check found.

    ``severity``: "error" (training cannot work like this), "warning" (a user should act on it) or
    "note" (a fact worth knowing that is often fine). ``check`` names the check (as in the log line),
    ``message`` says the cause in one or a few sentences, ``evidence`` holds the numbers behind it,
    ``where`` the culprit (module path, parameter, op, ``file:line``, batch entry), ``epoch`` and
    ``step`` (the global step) when it was found, ``fix`` what to do, ``option`` the option setting
    that turns the check off. ``id`` names the record (given when it is reported); ``withdraws``, on a record that
    withdraws an earlier one (a note whose message says why), that one's ``id``; ``same_as``, on a record of a
    problem (``evidence["problem"]``) that an earlier record of the run reports, that one's ``id``.
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
    id: str = ""
    withdraws: str = ""
    same_as: str = ""

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

    def as_json(self, **extra: Any) -> str:
        """The record as one line of JSON (``extra`` fields first); values JSON cannot hold are written as text."""
        return json.dumps({**extra, **self.as_dict()}, default=str, allow_nan=True)

    def cause(self) -> str:
        """The message's first sentence, whole: the one-line cause of a summary (see :func:`first_sentence`)."""
        return first_sentence(self.message)


# Abbreviations whose full stop ends no sentence ("e.g. x" goes on): the word before the stop, lower case.
_ABBREVIATIONS = frozenset({"e.g", "i.e", "vs", "cf", "approx", "incl", "resp", "etc"})
_OPENING, _CLOSING = "([{", ")]}"


def first_sentence(text: str) -> str:
    """The first sentence of ``text``'s first line, whole; the whole line when no sentence ends before its end.

    A sentence ends at ``.``, ``?`` or ``!`` followed by a space, outside parentheses and brackets (``(e.g. a
    mask. Or a view)`` goes on) and not after an abbreviation (``e.g.``, ``i.e.``, ``vs.``): numbers (``1e-3``), file
    names (``config.py:12``) and module paths (``enc.1``) have no space after their dots and stay whole. Never cuts a
    word or a sentence: what a summary shows of a finding reads as a sentence.
    """
    line = text.strip().split("\n", 1)[0]
    depth = 0
    for i, char in enumerate(line):
        if char in _OPENING:
            depth += 1
        elif char in _CLOSING:
            depth = max(depth - 1, 0)  # an unbalanced ")" (a list's "1)") opens nothing to wait for
        elif char in ".?!" and depth == 0 and line[i + 1 : i + 2] == " ":
            word = line[:i].rsplit(None, 1)[-1].lstrip(_OPENING + "'\"").lower() if line[:i].strip() else ""
            if char == "." and word in _ABBREVIATIONS:
                continue
            return line[: i + 1]
    return line


Sink = Callable[[Finding], None]
Clock = Callable[[], tuple[int | None, int | None]]
_sinks: list[Sink] = []
_clock: Clock | None = None
# The first finding of each problem (evidence["problem"]) reported in the current run.
_problems: dict[str, Finding] = {}


def set_clock(clock: Clock | None) -> None:
    """``clock()`` says ``(epoch, global step)`` for findings reported without them (None: nothing fills them in).

    A run sets its clock as it starts and clears it as it ends: the problems reported so far are forgotten both
    times, so that findings are folded (``same_as``) within one run only, never into another run's records."""
    global _clock
    _clock = clock
    _problems.clear()


def add_sink(sink: Sink) -> None:
    """Send every finding reported from now on to ``sink`` too (remove it with :func:`remove_sink`)."""
    _sinks.append(sink)


def remove_sink(sink: Sink) -> None:
    if sink in _sinks:
        _sinks.remove(sink)


def report(finding: Finding, verbosity: int | None = None) -> Finding:
    """Fill in the epoch and step the finding lacks from the run's clock, log it (warnings and errors at
    verbosity 2, notes at 3 unless ``verbosity`` says otherwise) and hand it to every sink. Returns the finding."""
    finding.id = finding.id or uuid.uuid4().hex[:12]
    if _clock is not None and (finding.epoch is None or finding.step is None):
        epoch, step = _clock()
        finding.epoch = epoch if finding.epoch is None else finding.epoch
        finding.step = step if finding.step is None else finding.step
    _fold(finding)
    log.v(verbosity if verbosity is not None else (3 if finding.severity == "note" else 2), finding.line())
    for sink in list(_sinks):
        sink(finding)
    return finding


def _fold(finding: Finding) -> None:
    """Within a run (a clock is set): mark ``finding`` ``same_as`` the first finding of its problem, and list its
    check in that one's ``evidence["also_reported_by"]``; remember it when it is the first."""
    problem = finding.evidence.get("problem") if isinstance(finding.evidence, dict) else None
    if _clock is None or not problem or finding.withdraws:
        return
    first = _problems.setdefault(str(problem), finding)
    if first is finding or first.id == finding.id:
        return
    finding.same_as = first.id
    also = first.evidence.setdefault("also_reported_by", [])
    if finding.check not in also and finding.check != first.check:
        also.append(finding.check)


def withdraw(finding: Finding, reason: str) -> Finding:
    """Withdraw ``finding`` (reported earlier) because the run contradicted it: report a note that carries its id and
    says why (``reason``: what the run showed since), logged at verbosity 2 like the warning it withdraws."""
    when = f"epoch {finding.epoch}, step {finding.step}" if finding.epoch is not None else f"step {finding.step}"
    withdrawal = Finding(
        "note",
        finding.check,
        f"withdrawn the {finding.severity} of {when}: {reason} (It said: {finding.cause()})",
        evidence={"withdrawn": finding.message},
        where=finding.where,
        withdraws=finding.id,
    )
    return report(withdrawal, verbosity=2)


def standing(found: list[Finding]) -> list[Finding]:
    """``found`` without the withdrawals and the findings they withdraw, and without the findings folded into an
    earlier one of the same problem (``same_as``; one whose first record was withdrawn stands): what the run still
    reports, one record per problem."""
    withdrawn = {f.withdraws for f in found if f.withdraws}
    return [f for f in found if not f.withdraws and f.id not in withdrawn and (not f.same_as or f.same_as in withdrawn)]


def withdrawals(found: list[Finding]) -> list[Finding]:
    """The records of ``found`` that withdraw a finding (of this run, or of the run a resumed one continues)."""
    return [f for f in found if f.withdraws]
