#!/usr/bin/env python3
"""Measure how the framework's diagnosis generalises (issue 49): run the corpus of real silent bugs and the healthy
corpus as real ``rnn.py`` processes with default options, and print one table per split.

The corpus is ``tests/corpus/bugs.toml`` (each bug with its source URL, category, split and the rule that decides
whether a run named it) and ``tests/corpus/healthy.toml``; the configs are ``tests/corpus/bugs/<id>.py`` (run
as they are: the bug; with ``++bug False``: its fixed twin) and ``tests/corpus/healthy/<id>.py``. A case whose
config does not exist yet is listed as not written and counted nowhere.

Each bug run is classified mechanically by its manifest entry, from its WARNING/ERROR log lines and the findings
of severity warning or error in its ``findings.jsonl``:

- named: a line matches one of ``named`` (it names the cause);
- hinted: otherwise a line matches one of ``place`` (a warning at the right place, without the cause);
- wrong cause: otherwise there is a WARNING/ERROR line (how many of them only say "Not decided yet", naming no
  cause, is printed beside the counts);
- silent: no such line;
- broke: the run exited non-zero (it counts as nothing else).

A twin or a healthy setup is a false alarm when it prints a WARNING/ERROR line or exits non-zero. The dev error
of each run (the last ``Epoch N evaluation: dev:`` value of the case's ``error_key``, default ``err``) is shown
beside it, so that the twin's advantage over the bug is visible too.

Usage::

    tools/measure-corpus.py --split dev --jobs 1            # the development half
    tools/measure-corpus.py --split all --out docs/corpus_results.txt
    tools/measure-corpus.py --only lstm --only mha           # some cases
    tools/measure-corpus.py --kind twin --seed 1 --jobs 2     # false alarms at another seed (twins only)
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import tomllib

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from framework.tool_args import ToolParser  # noqa: E402

CORPUS = os.path.join(ROOT, "tests", "corpus")
RNN = os.path.join(ROOT, "rnn.py")
EVALUATION = re.compile(r"Epoch (\d+) evaluation: dev: (.*)$")
VERDICTS = ("named", "hinted", "wrong cause", "silent", "broke")


@dataclasses.dataclass
class Run:
    """One rnn.py process: what it printed that matters."""

    exit_code: int
    alarms: list[str]  # WARNING/ERROR lines and severe findings, as text
    dev_error: float | None
    seconds: float


@dataclasses.dataclass
class Case:
    """A bug (with its twin) or a healthy setup from a manifest."""

    kind: str  # "bug" or "healthy"
    entry: dict
    config: str

    @property
    def id(self) -> str:
        return self.entry["id"]

    @property
    def split(self) -> str:
        return self.entry["split"]


def load_cases() -> list[Case]:
    """Every case of both manifests, in manifest order."""
    cases = []
    for kind, manifest, table, folder in (
        ("bug", "bugs.toml", "bug", "bugs"),
        ("healthy", "healthy.toml", "setup", "healthy"),
    ):
        with open(os.path.join(CORPUS, manifest), "rb") as f:
            entries = tomllib.load(f)[table]
        cases += [Case(kind, e, os.path.join(CORPUS, folder, e["id"] + ".py")) for e in entries]
    return cases


def run_config(config: str, overrides: list[str], error_key: str, timeout: float) -> Run:
    """``rnn.py config`` with default options in a fresh model directory; its alarms and last dev error."""
    directory = tempfile.mkdtemp(prefix="corpus-")
    start = time.monotonic()
    try:
        command = [sys.executable, RNN, config, "++model", repr(os.path.join(directory, "model")), *overrides]
        env = {**os.environ, "OMP_NUM_THREADS": "1"}
        try:
            done = subprocess.run(
                command, cwd=directory, env=env, capture_output=True, text=True, timeout=timeout, check=False
            )
            code, text = done.returncode, done.stdout + done.stderr
        except subprocess.TimeoutExpired as exc:
            code, text = (
                124,
                (exc.stdout or b"").decode(errors="replace") + (exc.stderr or b"").decode(errors="replace"),
            )
        alarms = [line.strip() for line in text.splitlines() if "WARNING" in line or "ERROR" in line]
        alarms += _severe_findings(os.path.join(directory, "findings.jsonl"))
        if code != 0:
            alarms.append(f"exit {code}: " + " | ".join(text.strip().splitlines()[-3:]))
        return Run(code, alarms, _last_dev_error(text, error_key), time.monotonic() - start)
    finally:
        shutil.rmtree(directory, ignore_errors=True)


def _severe_findings(path: str) -> list[str]:
    """The findings of severity warning or error in ``findings.jsonl``, as one text each (check, message, where)."""
    if not os.path.exists(path):
        return []
    texts = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            record = json.loads(line)
            if record.get("severity") in ("warning", "error"):
                where = json.dumps(record.get("where", {}))
                texts.append(f"finding {record.get('check')}: {record.get('message')} where={where}")
    return texts


def _last_dev_error(text: str, key: str) -> float | None:
    """The value of ``key`` in the last ``Epoch N evaluation: dev: ...`` line."""
    value = None
    for line in text.splitlines():
        match = EVALUATION.search(line)
        if match:
            found = re.search(rf"\b{re.escape(key)} ([-+0-9.e]+|nan|inf)", match.group(2))
            if found:
                value = float(found.group(1))
    return value


def verdict(entry: dict, run: Run) -> str:
    """The manifest's mechanical rule applied to a bug run."""
    if run.exit_code != 0:
        return "broke"
    for verdict_name, patterns in (("named", entry["named"]), ("hinted", entry["place"])):
        if any(re.search(p, line, re.IGNORECASE) for p in patterns for line in run.alarms):
            return verdict_name
    return "wrong cause" if run.alarms else "silent"


def measure(case: Case, timeout: float, extra: list[str], twin_only: bool = False) -> dict:
    """Run a case (a bug and its twin, or a healthy setup) and describe the outcome; ``extra`` is appended to every
    command line (``++random_seed 1``); ``twin_only`` leaves out the bug's run (its verdict is then "-")."""
    key = case.entry.get("error_key", "err")
    if case.kind == "healthy":
        run = run_config(case.config, extra, key, timeout)
        return {"case": case, "run": run, "false_alarm": bool(run.alarms)}
    twin = run_config(case.config, ["++bug", "False", *extra], key, timeout)
    bug = Run(0, [], None, 0.0) if twin_only else run_config(case.config, extra, key, timeout)
    return {
        "case": case,
        "bug": bug,
        "twin": twin,
        "verdict": "-" if twin_only else verdict(case.entry, bug),
        "false_alarm": bool(twin.alarms),
    }


def _undecided(run: Run) -> bool:
    """Whether every alarm of a run says "Not decided yet" (observed, ruled out, the next experiment) and none names
    a cause: counted as a wrong cause by the frozen rule, reported beside it."""
    return bool(run.alarms) and all("Not decided yet" in line and "Cause:" not in line for line in run.alarms)


def _error_text(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"


def report(results: list[dict], splits: list[str], missing: list[Case], verbose: bool) -> str:
    """The tables, one per split, then the cases one per line (with the alarms when ``verbose``)."""
    lines = []
    for split in splits:
        bugs = [r for r in results if r["case"].kind == "bug" and r["case"].split == split]
        healthy = [r for r in results if r["case"].kind == "healthy" and r["case"].split == split]
        counts = {v: sum(r["verdict"] == v for r in bugs) for v in VERDICTS}
        lines.append(f"== split {split}: {len(bugs)} bugs, {len(healthy)} healthy setups ==")
        twins_only = bool(bugs) and all(r["verdict"] == "-" for r in bugs)
        if twins_only:
            lines.append("  bugs: not run (--kind twin)")
        else:
            lines.append("  bugs: " + ", ".join(f"{v} {counts[v]}" for v in VERDICTS))
            undecided = sum(r["verdict"] == "wrong cause" and _undecided(r["bug"]) for r in bugs)
            lines.append(f"  of the wrong causes, warnings that name no cause and say 'Not decided yet': {undecided}")
        lines.append(f"  false alarms on fixed twins: {sum(r['false_alarm'] for r in bugs)} of {len(bugs)}")
        lines.append(f"  false alarms on healthy setups: {sum(r['false_alarm'] for r in healthy)} of {len(healthy)}")
        if not twins_only:
            hurt = [r for r in bugs if _hurts(r)]
            lines.append(f"  bugs whose dev error is worse than their twin's: {len(hurt)} of {len(bugs)}")
        lines.append("")
    lines.append("== cases ==")
    for r in results:
        case = r["case"]
        if case.kind == "bug":
            bug, twin = r["bug"], r["twin"]
            lines.append(
                f"{case.split:8} bug     {case.id:40} {r['verdict']:12} dev error twin {_error_text(twin.dev_error)} "
                f"bug {_error_text(bug.dev_error)}; twin {'FALSE ALARM' if r['false_alarm'] else 'quiet'} "
                f"({bug.seconds + twin.seconds:.0f} s)"
            )
            if verbose:
                lines += [f"    bug:  {a[:300]}" for a in bug.alarms] + [f"    twin: {a[:300]}" for a in twin.alarms]
        else:
            run = r["run"]
            lines.append(
                f"{case.split:8} healthy {case.id:40} {'FALSE ALARM' if r['false_alarm'] else 'quiet':12} "
                f"dev error {_error_text(run.dev_error)} ({run.seconds:.0f} s)"
            )
            if verbose:
                lines += [f"    {a[:300]}" for a in run.alarms]
    for case in missing:
        lines.append(f"{case.split:8} {case.kind:7} {case.id:40} not written")
    return "\n".join(lines)


def _hurts(result: dict) -> bool:
    bug, twin = result["bug"].dev_error, result["twin"].dev_error
    return bug is not None and twin is not None and bug > twin


def main() -> int:
    parser = ToolParser(__file__, __doc__, takes_config=False)
    parser.add_argument("--split", choices=["dev", "heldout", "all"], default="dev", help="which half (default dev)")
    parser.add_argument("--only", action="append", default=[], help="only cases whose id contains this (repeatable)")
    parser.add_argument(
        "--kind",
        choices=["bug", "twin", "healthy", "all"],
        default="all",
        help="bugs (each with its twin), the twins alone (false alarms only), healthy setups, or bugs and healthy",
    )
    parser.add_argument(
        "--seed", type=int, help="run every config with ++random_seed SEED (robustness of the verdicts)"
    )
    parser.add_argument("--jobs", type=int, default=1, help="cases run at once (default 1: the machine may be shared)")
    parser.add_argument("--timeout", type=float, default=600, help="seconds per rnn.py run before it counts as broke")
    parser.add_argument("--out", help="also write the report to this file")
    parser.add_argument("--quiet", action="store_true", help="leave out the alarm lines of each case")
    args = parser.parse_args()
    splits = ["dev", "heldout"] if args.split == "all" else [args.split]
    selected = [
        c
        for c in load_cases()
        if c.split in splits
        and args.kind in ("all", c.kind, "twin" if c.kind == "bug" else "")
        and (not args.only or any(part in c.id for part in args.only))
    ]
    extra = [] if args.seed is None else ["++random_seed", str(args.seed)]
    written = [c for c in selected if os.path.exists(c.config)]
    missing = [c for c in selected if not os.path.exists(c.config)]

    def measured(case: Case) -> dict:
        result = measure(case, args.timeout, extra, twin_only=args.kind == "twin")
        print(report([result], [], [], verbose=False).splitlines()[-1], file=sys.stderr, flush=True)  # progress
        return result

    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        results = list(pool.map(measured, written))
    text = report(results, splits, missing, verbose=not args.quiet)
    print(text)
    if args.out:
        with open(args.out, "w", encoding="utf-8") as f:
            f.write(f"$ tools/measure-corpus.py {' '.join(sys.argv[1:])}\n\n{text}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
