"""The block every run ends its log with, however it ends: how it ended, how far it got, the best dev
scores, what the checks found (grouped by check, with counts and the one-line cause), and where its
files are.
"""

from __future__ import annotations

import os
import signal

from framework.base.errors import TrainingInterrupted
from framework.base.findings import Finding, standing, withdrawals
from framework.base.log import format_duration
from framework.core.run_findings import FINDINGS_EXIT_STATUS, RunFindings
from framework.core.scores import Scores
from framework.core.state import RunState


def how_it_ended(outcome: str | None, ending: BaseException | None) -> str:
    """``completed``, ``interrupted: ...`` or ``failed: ValueError: ...`` (the first line of the message)."""
    first = str(ending).strip().split("\n", 1)[0] if ending is not None else ""
    if outcome in ("completed", "stopped"):
        done = "completed" if outcome == "completed" else "completed (training ended early)"
        return done if ending is None else f"{done}, then failed while closing: {type(ending).__name__}: {first}"
    if ending is None:
        return outcome or "completed"
    if isinstance(ending, TrainingInterrupted):  # the command that resumes follows in the message, not here
        return f"interrupted: {first.split(' Resume ', 1)[0]}"
    if isinstance(ending, KeyboardInterrupt):
        return "interrupted by Ctrl-C (KeyboardInterrupt)"
    if isinstance(ending, SystemExit):
        return f"ended by SystemExit({ending.code!r})"
    if outcome == "interrupted":  # a terminating signal outside training (exit_log.Terminated)
        signum = getattr(ending, "signum", None)
        name = signal.Signals(signum).name if signum else type(ending).__name__
        return f"interrupted by {name}: {first}"
    return f"failed: {type(ending).__name__}: {first}" if first else f"failed: {type(ending).__name__}"


def best_scores(scores: dict[int, Scores]) -> dict[str, dict[str, tuple[float, int]]]:
    """Per dataset other than train, per score: the lowest value over the epochs and its epoch."""
    best: dict[str, dict[str, tuple[float, int]]] = {}
    for epoch, per_dataset in sorted(scores.items()):
        for dataset, values in per_dataset.items():
            if dataset == "train":
                continue
            for name, value in values.items():
                known = best.setdefault(dataset, {}).get(name)
                if known is None or value < known[0]:
                    best[dataset][name] = (value, epoch)
    return best


def grouped(found: list[Finding]) -> list[str]:
    """One line per check (in the order they first reported): counts by severity, when first, the cause, and the
    other checks that found the same problems (folded into these records, see ``framework.base.findings``); then one
    line per withdrawn finding: what it said and why it was withdrawn."""
    by_check: dict[str, list[Finding]] = {}
    for finding in standing(found):
        by_check.setdefault(finding.check, []).append(finding)
    lines = []
    for check, group in by_check.items():
        counts = ", ".join(
            f"{n} {severity}{'s' if n > 1 else ''}"
            for severity in ("error", "warning", "note")
            if (n := sum(f.severity == severity for f in group))
        )
        first = next((f for f in group if f.severity != "note"), group[0])
        when = f"epoch {first.epoch}, step {first.step}" if first.epoch is not None else f"step {first.step}"
        others = len({f.cause() for f in group}) - 1
        more = f" (+{others} other cause{'s' if others > 1 else ''})" if others > 0 else ""
        also = list(dict.fromkeys(c for f in group for c in f.evidence.get("also_reported_by", ())))
        more += f" (also reported by: {', '.join(also)})" if also else ""
        lines.append(f"    {check}: {counts}; first at {when}: {first.cause()}{more}")
    for withdrawal in withdrawals(found):
        lines.append(f"    {withdrawal.check}: {withdrawal.cause()}")
    return lines


def summary_block(
    *,
    task: str,
    ended: str,
    epoch: int,
    num_epochs: int | None,
    global_step: int,
    seconds: float,
    scores: dict[int, Scores],
    found: list[Finding],
    files: dict[str, str],
    fail_note: str = "",
) -> str:
    """The block, one fact per line; ``files`` maps what (checkpoints, log, ...) to where."""
    of = f" of {num_epochs}" if num_epochs else ""
    lines = [
        f"Run summary: {ended}",
        f"  task {task}: epoch {epoch}{of}, global step {global_step}, {format_duration(seconds)}",
    ]
    best = best_scores(scores)
    for dataset, values in best.items():
        shown = ", ".join(f"{name} {value:.4g} (epoch {e})" for name, (value, e) in values.items())
        lines.append(f"  best {dataset}: {shown}")
    if found:
        kept, withdrawn = standing(found), len(withdrawals(found))
        counts = ", ".join(
            [
                f"{n} {s}{'s' if n > 1 else ''}"
                for s in ("error", "warning", "note")
                if (n := sum(f.severity == s for f in kept))
            ]
            + ([f"{withdrawn} withdrawn"] if withdrawn else [])
        )
        lines.append(f"  findings: {counts}")
        lines += grouped(found)
    else:
        lines.append("  findings: none")
    if fail_note:
        lines.append(f"  {fail_note}")
    lines += [f"  {what}: {where}" for what, where in files.items()]
    return "\n".join(lines)


def run_summary(
    state: RunState, run_findings: RunFindings, checkpoints: str | None, ending: BaseException | None, seconds: float
) -> str:
    """The summary block of the run ``state`` describes, ended by ``ending`` (None: it did its work) after ``seconds``;
    ``checkpoints``: the listing of its checkpoint files, if it has any."""
    config = state.config
    files: dict[str, str] = {}
    if checkpoints is not None:
        files["checkpoints"] = checkpoints
    logs = config.get("log")
    if logs:
        files["log"] = ", ".join([logs] if isinstance(logs, str) else logs)
    if run_findings.path is not None:
        directory = os.path.dirname(run_findings.path)
        files["findings file"] = run_findings.path
        drawn = "this run's page; again" if state.task == "train" and config.bool("report_html", True) else "written by"
        files["report"] = f"{os.path.join(directory, 'report.html')} ({drawn}: python -m framework report {directory})"
    failing = run_findings.failing()
    fail_note = (
        f"findings_fail_level = {run_findings.fail_level!r}: {len(failing)} finding(s) at that severity or above, "
        f"so the exit status is {FINDINGS_EXIT_STATUS}"
        if failing and ending is None
        else ""
    )
    return summary_block(
        task=state.task,
        ended=how_it_ended(state.outcome, ending),
        epoch=state.epoch,
        num_epochs=config.int("num_epochs") if state.task == "train" else None,
        global_step=state.global_step,
        seconds=seconds,
        scores=state.lr_control.scores if state.task == "train" else {state.epoch: state.eval_scores},
        found=run_findings.found,
        files=files,
        fail_note=fail_note,
    )
