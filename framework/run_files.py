"""What a model directory's record files say, read for ``report.html`` without trusting them.

``metrics.jsonl`` (framework.debug.run_metrics) and ``findings.jsonl`` (framework.core.run_findings)
are read as the files of someone else: a symbolic link or a file that is not a regular one (a FIFO,
a socket, a device, a directory) is refused without being opened for reading (no read can hang), a
line is at most ``MAX_LINE`` bytes, and a line that is not UTF-8, not a JSON object, or a record
without the fields of its kind is a ``DamagedRecordFile`` naming the file and the line. Only a last
line without its newline (a run killed while writing it) is skipped.

The files are read as a stream: per-step values go into ``Downsampled`` series of at most
``2 * POINTS`` bins each, so that a run of millions of steps is read in bounded memory.
"""

from __future__ import annotations

import datetime
import errno
import json
import math
import os
import stat
from collections.abc import Iterator
from typing import Any

from framework.base.errors import FrameworkError
from framework.base.findings import SEVERITIES

METRICS_NAME = "metrics.jsonl"
FINDINGS_NAME = "findings.jsonl"
MAX_LINE = 16 * 1024 * 1024  # longer than any record a run writes (a steps record is ~100 steps of a few numbers)
POINTS = 1000  # a series keeps between POINTS and 2 * POINTS bins: more than a picture's width in pixels
MAX_FINDINGS = 500  # findings kept for the page; the rest are counted


class DamagedRecordFile(FrameworkError):
    """A record file the report cannot read: a link, not a regular file, or a damaged line."""

    exit_code = 2


class Downsampled:
    """Values over the global step in bins of equal width (a power of two): while there are more than
    ``2 * points`` bins, the width doubles and neighbours merge. Each bin keeps the mean, minimum and maximum
    of its values and the mean of its steps; with width 1, a step recorded again (a resumed run repeating it)
    replaces the earlier value. Non-finite values are kept apart (the first ``points`` of them)."""

    def __init__(self, points: int = POINTS):
        self.points = points
        self.width = 1
        self.bins: dict[int, list[float]] = {}  # bin -> [sum of values, count, min, max, sum of steps]
        self.nonfinite: list[tuple[int, float]] = []

    def add(self, step: int, value: float | None) -> None:
        if value is None:
            return
        if not math.isfinite(value):
            if len(self.nonfinite) < self.points:
                self.nonfinite.append((step, value))
            return
        key = step // self.width
        known = self.bins.get(key)
        if known is None or self.width == 1:
            self.bins[key] = [value, 1, value, value, step]
        else:
            known[0] += value
            known[1] += 1
            known[2] = min(known[2], value)
            known[3] = max(known[3], value)
            known[4] += step
        if len(self.bins) > 2 * self.points:
            self._coarsen()

    def _coarsen(self) -> None:
        self.width *= 2
        merged: dict[int, list[float]] = {}
        for key, (total, count, low, high, steps) in sorted(self.bins.items()):
            into = merged.get(key // 2)
            if into is None:
                merged[key // 2] = [total, count, low, high, steps]
            else:
                into[0] += total
                into[1] += count
                into[2] = min(into[2], low)
                into[3] = max(into[3], high)
                into[4] += steps
        self.bins = merged

    def __bool__(self) -> bool:
        return bool(self.bins or self.nonfinite)

    def xs(self) -> list[float]:
        return [b[4] / b[1] for _, b in sorted(self.bins.items())]

    def means(self) -> list[float]:
        return [b[0] / b[1] for _, b in sorted(self.bins.items())]

    def ranges(self) -> tuple[list[float], list[float]]:
        ordered = [b for _, b in sorted(self.bins.items())]
        return [b[2] for b in ordered], [b[3] for b in ordered]


def open_record_file(path: str) -> Any:
    """``path`` opened for reading in binary, or None when there is none; refuses a link and anything but a
    regular file before reading from it."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        return None
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise DamagedRecordFile(
                f"{path} is a symbolic link: the report reads no link (a planted one could point anywhere). "
                f"Replace it by the file itself."
            ) from None
        raise DamagedRecordFile(f"{path} cannot be read: {os.strerror(exc.errno or 0) or exc}.") from None
    mode = os.fstat(fd).st_mode
    if not stat.S_ISREG(mode):
        os.close(fd)
        kind = (
            "a directory"
            if stat.S_ISDIR(mode)
            else "a FIFO"
            if stat.S_ISFIFO(mode)
            else "a socket"
            if stat.S_ISSOCK(mode)
            else "a device"
            if stat.S_ISCHR(mode) or stat.S_ISBLK(mode)
            else "not a regular file"
        )
        raise DamagedRecordFile(
            f"{path} is {kind}, where the run's records belong: the report reads regular files only. "
            f"Move it away, then run the report again."
        )
    return os.fdopen(fd, "rb")


def read_records(path: str) -> Iterator[tuple[int, dict[str, Any]]]:
    """``(line number, record)`` for each line of ``path`` (none when it does not exist); a damaged line is a
    ``DamagedRecordFile``, a last line without its newline (a killed run's) is skipped."""
    f = open_record_file(path)
    if f is None:
        return
    with f:
        number = 0
        while True:
            raw = f.readline(MAX_LINE + 1)
            if not raw:
                return
            number += 1
            if len(raw) > MAX_LINE:
                raise DamagedRecordFile(f"{path}, line {number}: longer than {MAX_LINE // 2**20} MB: not a record.")
            torn = not raw.endswith(b"\n")
            try:
                record = json.loads(raw.decode("utf-8"))
            except UnicodeDecodeError as exc:
                raise DamagedRecordFile(
                    f"{path}, line {number}: not UTF-8 text (byte {exc.start} of the line): the file is damaged."
                ) from None
            except json.JSONDecodeError as exc:
                if torn:
                    return
                raise DamagedRecordFile(
                    f"{path}, line {number}: not a JSON record ({exc.msg}, column {exc.colno}): the file is damaged."
                ) from None
            if not isinstance(record, dict):
                raise DamagedRecordFile(
                    f"{path}, line {number}: a JSON {type(record).__name__}, not a record (an object): "
                    f"the file is damaged."
                )
            yield number, record


_NUMBER = (int, float)
_OPTIONAL_NUMBER = (int, float, type(None))
# The fields the report reads, per record kind of metrics.jsonl, and their types.
METRICS_FIELDS: dict[str, dict[str, tuple[type, ...]]] = {
    "run": {"step": (int,), "options": (dict, type(None)), "modules": (dict, type(None))},
    "steps": {"step": (list,), "epoch": (list,), "lr": (list,), "losses": (dict,)},
    "epoch": {"step": (int,), "epoch": (int,), "scores": (dict,)},
    "memory": {"step": (int,), "rss_mb": _NUMBER},
    "scalars": {"step": (int,), "values": (dict,)},
    "end": {"step": (int,), "ended": (str,)},
}
FINDING_FIELDS: dict[str, tuple[type, ...]] = {"severity": (str,), "check": (str,), "message": (str,)}


def _time(text: Any) -> datetime.datetime | None:
    """An ISO time with its UTC offset, as the run writes them; None for anything else."""
    if not isinstance(text, str):
        return None
    try:
        parsed = datetime.datetime.fromisoformat(text)
    except ValueError:
        return None
    return parsed if parsed.tzinfo is not None else None


def _check_fields(record: dict[str, Any], fields: dict[str, tuple[type, ...]], where: str) -> None:
    for name, types in fields.items():
        if name not in record and type(None) not in types:
            raise DamagedRecordFile(f"{where}: the record has no field {name!r}: the file is damaged.")
        value = record.get(name)
        if not isinstance(value, types) or isinstance(value, bool):
            raise DamagedRecordFile(
                f"{where}: field {name!r} is {type(value).__name__} {json.dumps(value)[:40]}, not "
                f"{' or '.join(t.__name__ for t in types)}: the file is damaged."
            )


def _numbers(values: Any, where: str, what: str) -> list[float | None]:
    if not isinstance(values, list) or not all(isinstance(v, _OPTIONAL_NUMBER) for v in values):
        raise DamagedRecordFile(f"{where}: {what} is not a list of numbers: the file is damaged.")
    return values


class RunData:
    """What one model directory's record files say: the runs (a resumed run adds one), per-step series,
    epoch scores, memory, gradient norms per layer group, findings, and how the last run ended."""

    def __init__(self, directory: str, points: int = POINTS):
        self.directory = directory
        self.points = points
        self.runs: list[dict[str, Any]] = []  # the "run" records, each with the "end" record after it (or None)
        self.losses: dict[str, Downsampled] = {}
        self.lr = Downsampled(points)
        self.epochs: dict[int, dict[str, Any]] = {}
        self.rss = Downsampled(points)
        self.device = Downsampled(points)
        self.reserved = Downsampled(points)
        self.grad_norms: dict[str, Downsampled] = {}
        self.last_step: dict[str, int] | None = None  # {"step", "epoch"} of the newest training step
        self.findings: list[dict[str, Any]] = []
        self.findings_left_out = 0
        metrics_path = os.path.join(directory, METRICS_NAME)
        findings_path = os.path.join(directory, FINDINGS_NAME)
        read_metrics = self._read_metrics(metrics_path)
        read_findings = self._read_findings(findings_path)
        if not read_metrics and not read_findings:
            raise DamagedRecordFile(
                f"{directory} holds no {METRICS_NAME} and no {FINDINGS_NAME}: it is not the model directory of a "
                f"training run (the directory of the 'model' checkpoint prefix), or the run had metrics_file = False."
            )

    @property
    def name(self) -> str:
        return os.path.basename(os.path.abspath(self.directory)) or self.directory

    @property
    def ending(self) -> dict[str, Any] | None:
        """The "end" record of the newest run; None while it runs (or when it was killed without a word)."""
        return self.runs[-1]["end"] if self.runs else None

    def _read_metrics(self, path: str) -> bool:
        found = False
        for number, record in read_records(path):
            found = True
            where = f"{path}, line {number}"
            kind = record.get("kind")
            if not isinstance(kind, str):
                raise DamagedRecordFile(f"{where}: the record has no 'kind' (text): the file is damaged.")
            fields = METRICS_FIELDS.get(kind)
            if fields is None:
                continue  # a kind a newer framework writes: not drawn here
            _check_fields(record, fields, where)
            getattr(self, f"_take_{kind}")(record, where)
        return found

    def _take_run(self, record: dict[str, Any], where: str) -> None:
        self.runs.append({**record, "end": None})

    def _take_end(self, record: dict[str, Any], where: str) -> None:
        if self.runs:
            self.runs[-1]["end"] = record

    def _take_steps(self, record: dict[str, Any], where: str) -> None:
        steps = _numbers(record["step"], where, "'step'")
        epochs = _numbers(record["epoch"], where, "'epoch'")
        lrs = _numbers(record["lr"], where, "'lr'")
        columns = {name: _numbers(values, where, f"loss {name!r}") for name, values in record["losses"].items()}
        if any(len(c) != len(steps) for c in (epochs, lrs, *columns.values())):
            raise DamagedRecordFile(f"{where}: the columns of the steps record differ in length: the file is damaged.")
        for i, step in enumerate(steps):
            self.lr.add(step, lrs[i])
            for name, values in columns.items():
                self.losses.setdefault(name, Downsampled(self.points)).add(step, values[i])
        if steps:
            self.last_step = {"step": steps[-1], "epoch": epochs[-1]}

    def _take_epoch(self, record: dict[str, Any], where: str) -> None:
        for dataset, values in record["scores"].items():
            if not isinstance(values, dict) or not all(isinstance(v, _OPTIONAL_NUMBER) for v in values.values()):
                raise DamagedRecordFile(f"{where}: the scores of {dataset!r} are not numbers: the file is damaged.")
        self.epochs[record["epoch"]] = record

    def _take_memory(self, record: dict[str, Any], where: str) -> None:
        """Memory after the steps done (the record's step counts them): at the last step done, as epoch scores."""
        step = max(record["step"] - 1, 0)
        self.rss.add(step, record["rss_mb"])
        device, reserved = record.get("device_mb"), record.get("reserved_mb")
        if isinstance(device, _NUMBER):
            self.device.add(step, device)
        if isinstance(reserved, _NUMBER):
            self.reserved.add(step, reserved)

    def _take_scalars(self, record: dict[str, Any], where: str) -> None:
        """Gradient norms per layer group (the module a parameter belongs to): the root of the summed squares."""
        groups: dict[str, float] = {}
        for tag, value in record["values"].items():
            if not tag.startswith("grad_health/grad_norm/") or not isinstance(value, _NUMBER):
                continue
            group = tag.removeprefix("grad_health/grad_norm/").rpartition(".")[0] or "(model)"
            groups[group] = groups.get(group, 0.0) + value * value
        for group, squares in groups.items():
            self.grad_norms.setdefault(group, Downsampled(self.points)).add(record["step"], math.sqrt(squares))

    def _read_findings(self, path: str) -> bool:
        found = False
        for number, record in read_records(path):
            found = True
            where = f"{path}, line {number}"
            _check_fields(record, FINDING_FIELDS, where)
            if record["severity"] not in SEVERITIES:
                raise DamagedRecordFile(
                    f"{where}: severity {record['severity'][:20]!r} is none of {', '.join(SEVERITIES)}: "
                    f"the file is damaged."
                )
            for name in ("epoch", "step"):
                if not isinstance(record.get(name), (int, type(None))) or isinstance(record.get(name), bool):
                    raise DamagedRecordFile(f"{where}: field {name!r} is not a whole number: the file is damaged.")
            if len(self.findings) < MAX_FINDINGS:
                self.findings.append(record)
            else:
                self.findings_left_out += 1
        return found

    def score_names(self) -> list[str]:
        names: dict[str, None] = dict.fromkeys(self.losses)
        for record in self.epochs.values():
            for values in record["scores"].values():
                names.update(dict.fromkeys(values))
        return list(names)

    def chance_levels(self) -> dict[str, float]:
        """Loss name -> its chance level (the value without using the input), from the newest epoch that has one."""
        for record in sorted(self.epochs.values(), key=lambda r: r["epoch"], reverse=True):
            chance = record.get("chance")
            if isinstance(chance, dict) and chance:
                return {k: v for k, v in chance.items() if isinstance(v, (int, float)) and not isinstance(v, bool)}
        return {}

    def steps_seen(self) -> list[int]:
        """The last global step of the training steps, epochs and findings recorded (what the step axis must show)."""
        seen = [self.last_step["step"]] if self.last_step else []
        seen += [max(r["step"] - 1, 0) for r in self.epochs.values()]
        seen += [f["step"] for f in self.findings if isinstance(f.get("step"), int)]
        return [max(seen)] if seen else []

    def epoch_hours(self) -> dict[int, float]:
        """Epoch -> hours from the first run's start to the epoch's end (epochs and runs that recorded their time)."""
        start = _time(self.runs[0].get("time")) if self.runs else None
        if start is None:
            return {}
        hours = {}
        for epoch, record in self.epochs.items():
            end = _time(record.get("time"))
            if end is not None:
                hours[epoch] = (end - start).total_seconds() / 3600
        return hours

    def resumes(self) -> list[int]:
        """The global steps where a resumed run continued the model (every run record after the first)."""
        return [run["step"] for run in self.runs[1:]]
