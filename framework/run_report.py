"""``report.html``: one self-contained page that shows a run, or several runs side by side, from the files they
left in their model directories (read by ``framework.run_files``).

The page says how each run ended (completed, failed and where, interrupted, or silent: still running or
killed), when it ran and was resumed, and the command that reproduces it; it draws static SVG pictures
with matplotlib (Agg backend, no display): every score of train and dev on one global-step axis (train
per step, its range where steps were merged into one point, train and dev per epoch, the best dev value
starred), the applied learning rate, gradient norms per layer group, memory, each finding as a numbered
marker (notes fainter) and each resume as a grey line on every curve; then the findings with their
evidence, the options that differ from the defaults, and attention heatmaps of the first dev batch.
Several runs share the axes, one colour per run (their epoch scores also by wall-clock time), and their options
are tabled side by side. The page
needs no network and no server: the pictures are inline SVG, a point's value shows on hover.
"""

from __future__ import annotations

import html
import io
import json
import os
from collections import Counter
from typing import Any

import matplotlib

matplotlib.use("Agg")  # no display: a file, never a window
matplotlib.rcParams["svg.fonttype"] = "none"  # text as <text>: searchable, selectable, and smaller than paths
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.ticker import MaxNLocator, ScalarFormatter  # noqa: E402

from framework.run_files import DamagedRecordFile, Downsampled, RunData, open_record_file  # noqa: E402

REPORT_NAME = "report.html"
COLORS = {"error": "#c62828", "warning": "#ef6c00", "note": "#9e9e9e"}  # finding markers by severity
DATASET_COLORS = ("#2e7d32", "#6a1b9a", "#00838f", "#8d6e63")  # dev, then other datasets (train is blue)
RUN_COLORS = ("#1565c0", "#c62828", "#2e7d32", "#6a1b9a", "#ef6c00", "#00838f", "#8d6e63", "#ad1457")
RESUME_COLOR = "#616161"
MAX_MODULES, MAX_HEADS, MAX_POSITIONS = 12, 16, 64
TOKENS = "__tokens__"  # attention.npz's entry of the input tokens (framework.debug.attention_maps.TOKENS)  # the attention drawn (framework.debug.attention_maps keeps no more)
LEGEND = {"fontsize": 8, "loc": "upper left", "bbox_to_anchor": (1.01, 1.0), "borderaxespad": 0.0}  # beside the axes


def _svg(fig: Any) -> str:
    buffer = io.StringIO()
    fig.savefig(buffer, format="svg", bbox_inches="tight")
    plt.close(fig)
    text = buffer.getvalue()
    return text[text.index("<svg") :]  # inline: without the XML prolog and doctype


def _plain_axis(ax: Any) -> None:
    """Tick labels as the numbers themselves: no offset ("+1e-3") and no scale factor above the axis."""
    formatter = ScalarFormatter(useOffset=False)
    formatter.set_scientific(False)
    ax.yaxis.set_major_formatter(formatter)


def _step_axis(ax: Any, runs: list[RunData]) -> None:
    """The global step axis, the same on every picture: from 0 to the last step any run recorded, whole steps only."""
    last = max([1] + [step for data in runs for step in data.steps_seen()])
    ax.set_xlim(-0.02 * last, last * 1.02)
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_xlabel("global step")


def _mark(ax: Any, runs: list[RunData], top: bool) -> None:
    """Each finding as a dashed line at its step, numbered as in its run's list (notes dotted and faint), and
    each resume as a grey line."""
    several = len(runs) > 1
    for r, data in enumerate(runs, start=1):
        for step in data.resumes():
            ax.axvline(step, color=RESUME_COLOR, linestyle=(0, (1, 2)), linewidth=1.2)
            if top:
                ax.annotate(
                    "resumed", (step, 0.0), xycoords=("data", "axes fraction"), color=RESUME_COLOR, fontsize=7,
                    rotation=90, ha="right", va="bottom",
                )  # fmt: skip
        withdrawn = _withdrawn(data.findings)
        for number, finding in _shown(data.findings):
            if finding.get("step") is None:
                continue
            note = finding["severity"] == "note" or finding.get("id") in withdrawn
            color = COLORS["note"] if finding.get("id") in withdrawn else COLORS.get(finding["severity"], "black")
            line = ax.axvline(
                finding["step"], color=color, linestyle=":" if note else "--", linewidth=0.8 if note else 1.1,
                alpha=0.6 if note else 1.0,
            )  # fmt: skip
            line.set_gid(f"finding-{r}-{number}")
            if top:
                ax.annotate(
                    f"{r}.{number}" if several else str(number), (finding["step"], 1.0),
                    xycoords=("data", "axes fraction"), color=color, fontsize=7 if note else 9, ha="center",
                    va="bottom",
                )  # fmt: skip


HOVER_POINTS = 50  # the values a curve's tooltip lists: enough to read it, small enough for a long run's page


def _titled(points: Any, text: str) -> None:
    """A tooltip on a drawn artist (its SVG group gets a <title>: the browser shows it on hover)."""
    points.set_gid("tip:" + text)


def _series(ax: Any, series: Downsampled, color: str, label: str, linewidth: float = 0.8) -> None:
    """A per-step series: its line, and the range of the merged steps as a band where bins hold several."""
    xs = series.xs()
    if xs:
        means = series.means()
        line = ax.plot(xs, means, color=color, linewidth=linewidth, label=label)[0]
        shown = range(0, len(xs), max(1, -(-len(xs) // HOVER_POINTS)))  # at most HOVER_POINTS, evenly spread
        _titled(line, f"{label}: " + ", ".join(f"step {xs[i]:g}: {means[i]:.4g}" for i in shown))
        if series.width > 1:
            low, high = series.ranges()
            ax.fill_between(xs, low, high, color=color, alpha=0.2, linewidth=0)
    if series.nonfinite:
        steps = [s for s, _ in series.nonfinite]
        ax.scatter(steps, [0.0] * len(steps), marker="x", color="#c62828", transform=ax.get_xaxis_transform(),
                   label=f"{label}: NaN/Inf", zorder=5)  # fmt: skip


def _epoch_points(ax: Any, data: RunData, dataset: str, name: str, color: str, label: str) -> None:
    """The scores of ``dataset`` per epoch, at the epoch's last step (the record's step counts the steps done)."""
    points = sorted(
        (max(r["step"] - 1, 0), r["scores"][dataset][name])
        for r in data.epochs.values()
        if isinstance(r["scores"].get(dataset, {}).get(name), (int, float))
    )
    if not points:
        return
    xs, ys = zip(*points, strict=True)
    style = {"marker": "o", "linestyle": "-"} if dataset == "train" else {"marker": "s", "linestyle": "--"}
    line = ax.plot(xs, ys, markersize=4 if len(xs) <= 40 else 2, color=color, label=label, **style)[0]
    _titled(line, f"{label}, {name}: " + ", ".join(f"step {x}: {y:.4g}" for x, y in points[:HOVER_POINTS]))
    if dataset != "train":
        step, best = min(points, key=lambda p: p[1])
        ax.scatter([step], [best], marker="*", s=140, color=color, edgecolor="black", linewidth=0.5, zorder=6,
                   label=f"best {dataset} {best:.4g} (step {step})")  # fmt: skip


def _datasets(runs: list[RunData]) -> list[str]:
    found = {d for data in runs for r in data.epochs.values() for d in r["scores"]}
    return sorted(found, key=lambda d: (d != "train", d != "dev", d))


def curves_figure(runs: list[RunData]) -> str:
    """One panel per score (loss or error): train per step, train and dev per epoch, findings and resumes
    marked; one colour per run when there are several."""
    names = list(dict.fromkeys(n for data in runs for n in data.score_names()))
    if not names:
        return ""
    fig, axes = plt.subplots(len(names), 1, figsize=(10, 2.8 * len(names)), sharex=True, squeeze=False)
    several = len(runs) > 1
    for i, (ax, name) in enumerate(zip(axes[:, 0], names, strict=True)):
        for r, data in enumerate(runs):
            run_color = RUN_COLORS[r % len(RUN_COLORS)]
            prefix = f"{data.name}: " if several else ""
            if name in data.losses:
                _series(ax, data.losses[name], "#90caf9" if not several else run_color, f"{prefix}train (step)",
                        linewidth=0.8 if not several else 0.6)  # fmt: skip
            others = iter(DATASET_COLORS)
            for dataset in _datasets([data]):
                color = run_color if several else "#1565c0" if dataset == "train" else next(others, "black")
                _epoch_points(ax, data, dataset, name, color, f"{prefix}{dataset} (epoch)")
        for data in runs[:1] if not several else []:
            chance = data.chance_levels().get(name)
            if chance is not None:
                ax.axhline(chance, color="#424242", linestyle="-.", linewidth=1, label=f"chance level {chance:.4g}")
        _mark(ax, runs, top=i == 0)
        ax.set_ylabel(name)
        ax.grid(alpha=0.3)
        ax.legend(**LEGEND)
    _step_axis(axes[-1, 0], runs)
    return _svg(fig)


def wall_time_figure(runs: list[RunData]) -> str:
    """Of several runs: each score of dev (else train) per epoch over the wall-clock time since the run's first
    start (a resumed run's pause included), one colour per run; a sentence instead where the runs were too short
    for their whole-second times."""
    names = list(dict.fromkeys(n for data in runs for n in data.score_names()))
    timed = [(data, data.epoch_hours()) for data in runs]
    if not names or not any(hours for _, hours in timed):
        return ""
    span = max(h for _, hours in timed for h in hours.values()) if any(hours for _, hours in timed) else 0
    if span * 3600 < 2:  # every epoch within a second or two of the start: a picture would invent the times
        return (
            "<p>The runs took under two seconds each: their times are whole seconds, too coarse to place their "
            "epochs in time.</p>"
        )
    unit, per_hour = ("seconds", 3600) if span < 2 / 60 else ("minutes", 60) if span < 2 else ("hours", 1)
    timed = [(data, {epoch: h * per_hour for epoch, h in hours.items()}) for data, hours in timed]
    fig, axes = plt.subplots(len(names), 1, figsize=(10, 2.4 * len(names)), sharex=True, squeeze=False)
    for ax, name in zip(axes[:, 0], names, strict=True):
        for r, (data, hours) in enumerate(timed):
            dataset = "dev" if "dev" in _datasets([data]) else "train"
            points = [
                (hours[epoch], record["scores"][dataset][name])
                for epoch, record in sorted(data.epochs.items())
                if epoch in hours and isinstance(record["scores"].get(dataset, {}).get(name), (int, float))
            ]
            if points:
                color = RUN_COLORS[r % len(RUN_COLORS)]
                ax.plot(
                    *zip(*points, strict=True), marker="s", markersize=3, color=color, label=f"{data.name}: {dataset}"
                )
        ax.set_ylabel(name)
        ax.grid(alpha=0.3)
        ax.legend(**LEGEND)
    axes[-1, 0].set_xlim(left=0)  # after the curves: they set the right end
    if unit == "seconds":
        axes[-1, 0].xaxis.set_major_locator(MaxNLocator(integer=True))
    axes[-1, 0].set_xlabel(f"{unit} since the run first started (the times are whole seconds)")
    return _svg(fig)


def lines_figure(
    series: dict[str, Downsampled],
    ylabel: str,
    runs: list[RunData],
    *,
    log_scale: bool = False,
    from_zero: bool = False,
) -> str:
    """Curves over the global step, one per entry of ``series``, with the findings and resumes marked;
    ``from_zero``: the axis starts at 0, so that a constant or a small change looks like what it is."""
    series = {k: v for k, v in series.items() if v}
    if not series:
        return ""
    fig, ax = plt.subplots(figsize=(10, 3))
    for i, (label, values) in enumerate(series.items()):
        color = RUN_COLORS[i % len(RUN_COLORS)]
        _series(ax, values, color, label, linewidth=1.2)
        if len(values.xs()) < 50:
            ax.plot(values.xs(), values.means(), ".", color=color)
    _mark(ax, runs, top=True)
    means = [v for values in series.values() for v in values.means()]
    if log_scale and means and min(means) > 0 and max(means) > 10 * min(means):  # a log axis for decades only
        ax.set_yscale("log")
    else:
        _plain_axis(ax)
        if from_zero:
            ax.set_ylim(bottom=0, top=max(max(v.ranges()[1], default=0) for v in series.values()) * 1.15 or 1)
    _step_axis(ax, runs)
    ax.set_ylabel(ylabel)
    ax.grid(alpha=0.3)
    ax.legend(**LEGEND)
    return _svg(fig)


def attention_figures(path: str) -> list[tuple[str, str]]:
    """``(module name, svg)`` per attention module in ``attention.npz``: the heads of the first sequence, with
    query and key positions on the axes and a colour scale."""
    import numpy as np

    f = open_record_file(path)  # no link, no special file
    if f is None:
        return []
    figures = []
    with f:
        arrays, tokens = _attention_arrays(np, f, path)
        for name, weights in arrays:
            heads = weights.shape[0]
            columns = min(heads, 4)
            rows = -(-heads // columns)
            fig, axes = plt.subplots(rows, columns, figsize=(2.6 * columns, 2.4 * rows), squeeze=False)
            image = None
            for h in range(rows * columns):
                ax = axes[h // columns, h % columns]
                if h >= heads:
                    ax.set_axis_off()
                    continue
                image = ax.imshow(weights[h], cmap="viridis", aspect="auto", interpolation="nearest", vmin=0, vmax=1)
                ax.set_title(f"head {h}", fontsize=8)
                ax.tick_params(labelsize=6)
                _token_ticks(ax, tokens, weights.shape[1:])
                what = "token" if tokens else "position"
                if h // columns == rows - 1 or h + columns >= heads:  # the lowest panel of its column
                    ax.set_xlabel(f"key {what}", fontsize=7)
                if h % columns == 0:
                    ax.set_ylabel(f"query {what}", fontsize=7)
            if image is not None:
                fig.colorbar(image, ax=axes.ravel().tolist(), shrink=0.8, label="attention weight")
            figures.append((name, _svg(fig)))
    return figures


def _token_ticks(ax: Any, tokens: list[str], shape: tuple[int, int]) -> None:
    """The input tokens as tick labels of an axis as long as the sequence or longer (its padding unlabelled);
    every n-th where there are many."""
    if not tokens:
        return
    every = max(1, -(-len(tokens) // 24))
    ticks = list(range(0, len(tokens), every))
    for length, set_ticks, set_labels in ((shape[1], ax.set_xticks, ax.set_xticklabels),
                                          (shape[0], ax.set_yticks, ax.set_yticklabels)):  # fmt: skip
        if length >= len(tokens):
            set_ticks(ticks)
            set_labels([tokens[i] for i in ticks], fontsize=5, rotation=90 if set_ticks == ax.set_xticks else 0)


def _attention_arrays(np: Any, f: Any, path: str) -> tuple[list[tuple[str, Any]], list[str]]:
    """``(module name, [heads, queries, keys] weights)`` of ``attention.npz``, and the first sequence's input tokens
    (none when not kept): at most ``MAX_HEADS`` heads and ``MAX_POSITIONS`` positions each way are drawn; a file that
    is not such an archive is a ``DamagedRecordFile``."""
    try:
        with np.load(f, allow_pickle=False) as saved:
            names = [name for name in saved.files if name != TOKENS]
            arrays = [(name, saved[name]) for name in names[:MAX_MODULES]]
            kept = saved[TOKENS] if TOKENS in saved.files else np.array([], dtype=str)
    except Exception as exc:  # numpy raises many kinds for a damaged archive (BadZipFile, ValueError, EOFError, ...)
        raise DamagedRecordFile(
            f"{path} is not an archive of attention weights ({type(exc).__name__}: {exc})."
        ) from None
    if kept.ndim != 1 or (kept.size and kept.dtype.kind != "U"):
        raise DamagedRecordFile(f"{path}: {TOKENS!r} is a {kept.ndim}-dimensional {kept.dtype} array, not tokens.")
    tokens = [str(t) for t in kept[:MAX_POSITIONS]]
    for name, weights in arrays:
        if weights.ndim != 3 or weights.dtype.kind != "f":
            raise DamagedRecordFile(
                f"{path}: {name!r} is a {weights.ndim}-dimensional {weights.dtype} array, not attention weights "
                f"[heads, queries, keys]: the file is damaged."
            )
    return [(name, w[:MAX_HEADS, :MAX_POSITIONS, :MAX_POSITIONS]) for name, w in arrays], tokens


def _table(rows: list[list[str]], head: list[str], classes: list[str] | None = None) -> str:
    """An HTML table of cells already escaped; ``classes``: a CSS class per row."""
    cells = "".join(f"<th>{html.escape(h)}</th>" for h in head)
    kinds = classes or [""] * len(rows)
    body = "".join(
        (f"<tr class='{kind}'>" if kind else "<tr>") + "".join(f"<td>{c}</td>" for c in row) + "</tr>"
        for row, kind in zip(rows, kinds, strict=True)
    )
    return f"<table><tr>{cells}</tr>{body}</table>"


def _value(value: Any) -> str:
    """A value of a finding's field: text as it is (several lines preformatted), anything else as JSON."""
    if isinstance(value, str):
        text = html.escape(value[:4000])
        return f"<pre>{text}</pre>" if "\n" in value else f"<code>{text}</code>"
    return f"<code>{html.escape(json.dumps(value, default=str)[:400])}</code>"


def _fields(value: Any) -> str:
    """A finding's ``evidence`` or ``where``: ``key: value`` pairs, one per line."""
    if isinstance(value, dict):
        return "<br>".join(f"{html.escape(str(k))}: {_value(v)}" for k, v in value.items())
    return _value(value)


def _withdrawn(findings: list[dict[str, Any]]) -> dict[str, str]:
    """id -> the message of the record that withdraws it (the run contradicted it later, and says why)."""
    return {f["withdraws"]: str(f.get("message", "")) for f in findings if f.get("withdraws")}


def _folded(findings: list[dict[str, Any]]) -> dict[str, list[str]]:
    """id -> the checks whose later records of the same problem were folded into it (``same_as``: one problem, one
    record); a record folded into a withdrawn one is not folded (it stands)."""
    withdrawn = _withdrawn(findings)
    folded: dict[str, list[str]] = {}
    for f in findings:
        first = f.get("same_as")
        if first and first not in withdrawn and str(f.get("check")) not in folded.setdefault(first, []):
            folded[first].append(str(f.get("check")))
    return folded


def _shown(findings: list[dict[str, Any]]) -> list[tuple[int, dict[str, Any]]]:
    """The records a page lists and marks, numbered in the file's order: all but those folded into an earlier one."""
    withdrawn = _withdrawn(findings)
    return [
        (number, f)
        for number, f in enumerate(findings, start=1)
        if not f.get("same_as") or f.get("same_as") in withdrawn
    ]


def findings_section(data: RunData, run_number: int | None = None) -> str:
    """The findings of a run as a table, numbered as their markers on the curves (``run.number`` of several runs);
    a withdrawn finding is struck through, with the withdrawal's reason."""
    findings = data.findings
    if not findings:
        return "<p>No findings: every check that ran was quiet.</p>"
    withdrawn, folded = _withdrawn(findings), _folded(findings)
    shown = _shown(findings)
    rows = []
    for number, f in shown:
        details = [html.escape(str(f.get("message", ""))).replace("\n", "<br>")]
        if f.get("id") in withdrawn:
            details = [f"<s>{details[0]}</s>", f"<div class='k'>withdrawn: {html.escape(withdrawn[f['id']])}</div>"]
        if folded.get(f.get("id")):
            details.append(f"<div class='k'>also reported by: {html.escape(', '.join(folded[f['id']]))}</div>")
        for key in ("evidence", "where"):
            if f.get(key):
                details.append(f"<div class='k'>{key}:<br>{_fields(f[key])}</div>")
        for key in ("fix", "option"):
            if f.get(key):
                details.append(f"<div class='k'>{key}: {html.escape(str(f[key]))}</div>")
        severity = html.escape(f["severity"])
        rows.append(
            [
                f"{run_number}.{number}" if run_number else str(number),
                f"<span class='sev {severity}'>{severity}</span>",
                html.escape(f["check"]),
                html.escape(f"epoch {f.get('epoch')}, step {f.get('step')}"),
                "".join(details),
            ]
        )
    faint = [  # notes: facts, often fine; withdrawn findings: contradicted by the run since
        "withdrawn" if f.get("id") in withdrawn else "faint" if f["severity"] == "note" else "" for _, f in shown
    ]
    table = _table(rows, ["#", "severity", "check", "when", "cause, evidence, where, fix, option"], faint)
    if data.findings_left_out:
        table += f"<p>{data.findings_left_out} more finding(s) in findings.jsonl are not shown.</p>"
    return table


def _ended(data: RunData) -> tuple[str, str]:
    """How the newest run ended, and a CSS class for it."""
    if not data.runs:
        return "not recorded (no metrics.jsonl)", ""
    ending = data.ending
    if ending is None:
        return "no end recorded: the run is still going, or it was killed before it could say (SIGKILL, a crash)", ""
    text = ending["ended"]
    kind = "error" if text.startswith("failed") else "warning" if text.startswith("interrupted") else "ok"
    return text, kind


def status_section(data: RunData) -> str:
    """How the run ended, how far it got, its findings, and each run of the model (start, resume) with the
    command that reproduces it."""
    text, kind = _ended(data)
    last = data.last_step or {}
    withdrawn = _withdrawn(data.findings)
    standing = [f for _, f in _shown(data.findings) if not f.get("withdraws") and f.get("id") not in withdrawn]
    counts = Counter(f["severity"] for f in standing)
    found = ", ".join(
        [f"{counts[s]} {s}{'s' if counts[s] > 1 else ''}" for s in ("error", "warning", "note") if counts[s]]
        + ([f"{len(withdrawn)} withdrawn"] if withdrawn else [])
    )
    failures = [f for f in data.findings if f["check"] == "run failed"]
    parts = [
        f"<p class='ended {kind}'>Ended: {html.escape(text)}</p>",
        f"<p>Last training step: global step {last.get('step', '-')}, epoch {last.get('epoch', '-')}. "
        f"Findings: {html.escape(found or 'none')}.</p>",
    ]
    if failures:
        where = failures[-1].get("where") or {}
        if where:
            parts.append(f"<p class='error'>Where it failed:<br>{_fields(where)}</p>")
    rows = []
    for i, run in enumerate(data.runs, start=1):
        end = run["end"]
        ended = end["ended"] if end else "(no end recorded)"
        started = run.get("time") or "-"
        finished = end.get("time", "-") if end else "-"
        how = "started" if i == 1 and not run["step"] else f"resumed at global step {run['step']}"
        command = run.get("command")
        rows.append(
            [
                str(i),
                html.escape(f"{started} to {finished}"),
                html.escape(how),
                html.escape(ended),
                f"<code>{html.escape(command)}</code>" if isinstance(command, str) else "-",
            ]
        )
    if rows:
        parts.append(_table(rows, ["run", "when", "how", "ended", "command that reproduces it"]))
    return "\n".join(parts)


def options_section(runs: list[RunData]) -> str:
    """The options each run set to other than their defaults; of several runs, those that differ between them."""
    per_run = [(data.runs[-1].get("options") or {}) if data.runs else {} for data in runs]
    if len(runs) == 1:
        options = per_run[0]
        if not options:
            return "<p>None recorded.</p>"
        return _table(
            [[html.escape(k), f"<code>{html.escape(str(v))}</code>"] for k, v in options.items()], ["option", "value"]
        )
    names = sorted({k for options in per_run for k in options})
    differ = [n for n in names if len({str(options.get(n, "(default)")) for options in per_run}) > 1]
    if not differ:
        return "<p>The runs set the same options.</p>"
    rows = [
        [html.escape(n)] + [f"<code>{html.escape(str(options.get(n, '(default)')))}</code>" for options in per_run]
        for n in differ
    ]
    return _table(rows, ["option"] + [data.name for data in runs])


STYLE = """
body { font-family: sans-serif; margin: 2em auto; max-width: 1150px; color: #212121; }
h1 { font-size: 1.5em; } h2 { font-size: 1.2em; margin-top: 1.6em; border-bottom: 1px solid #ddd; }
table { border-collapse: collapse; width: 100%; font-size: 0.9em; }
td, th { border: 1px solid #ddd; padding: 4px 6px; vertical-align: top; text-align: left; }
code { font-size: 0.9em; word-break: break-all; } pre { font-size: 0.85em; white-space: pre-wrap; margin: 2px 0; } .k { color: #555; margin-top: 3px; }
.sev { font-weight: bold; } .error { color: #c62828; } .warning { color: #ef6c00; } .note { color: #757575; }
.ended { font-size: 1.15em; font-weight: bold; } .ok { color: #2e7d32; } tr.faint { color: #757575; font-size: 0.9em; } tr.withdrawn { color: #9e9e9e; }
svg { max-width: 100%; height: auto; }
"""


def _hover_titles(svg: str) -> str:
    """matplotlib writes a gid as the id of the artist's group; a ``tip:`` one becomes a <title> (the hover text)."""
    out, rest = [], svg
    marker = '<g id="tip:'
    while marker in rest:
        before, _, after = rest.partition(marker)
        text, _, tail = after.partition('">')
        out.append(f"{before}<g><title>{text}</title>")
        rest = tail
    out.append(rest)
    return "".join(out)


def _group_name(data: RunData, group: str) -> str:
    """A layer group as its module path with the module's class: ``encoder.0 (Linear)``."""
    modules = (data.runs[-1].get("modules") if data.runs else None) or {}
    kind = modules.get(group) if isinstance(modules, dict) else None
    return f"{group} ({kind})" if isinstance(kind, str) else group


def _pictures(runs: list[RunData]) -> list[tuple[str, str]]:
    several = len(runs) > 1

    def per_run(label: str, pick: Any) -> dict[str, Downsampled]:
        return {(f"{data.name}: {label}" if several else label): pick(data) for data in runs}

    grad_norms = {
        (f"{data.name}: " if several else "") + _group_name(data, group): values
        for data in runs
        for group, values in sorted(data.grad_norms.items())
    }
    memory = {
        **per_run("host: process RSS (MB)", lambda d: d.rss),
        **per_run("accelerator: allocated by tensors (MB)", lambda d: d.device),
        **per_run("accelerator: reserved by the caching allocator (MB)", lambda d: d.reserved),
    }
    return [
        ("Scores of train and dev", curves_figure(runs)),
        (
            "Applied learning rate",
            lines_figure(per_run("learning rate", lambda d: d.lr), "learning rate", runs, from_zero=True),
        ),  # fmt: skip
        (
            "Gradient norms per layer group (module path)",
            lines_figure(grad_norms, "gradient norm", runs, log_scale=True),
        ),  # fmt: skip
        ("Memory", lines_figure(memory, "MB", runs, from_zero=True)),
    ]


def _page(title: str, parts: list[str]) -> str:
    body = "\n".join(parts)
    return (
        f"<!DOCTYPE html>\n<html><head><meta charset='utf-8'><title>{html.escape(title)}</title>"
        f"<style>{STYLE}</style></head><body>\n{body}\n</body></html>\n"
    )


def render(directory: str) -> str:
    """The page of the run in ``directory``, as HTML text."""
    return render_runs([RunData(directory)])


def render_runs(runs: list[RunData]) -> str:
    """The page of one run, or of several runs compared on shared axes, as HTML text."""
    several = len(runs) > 1
    if several:
        title = "Runs compared: " + ", ".join(data.name for data in runs)
        parts = [f"<h1>{html.escape(title)}</h1>"]
        rows = []
        for r, data in enumerate(runs, start=1):
            text, kind = _ended(data)
            last = data.last_step or {}
            rows.append(
                [
                    f"<span style='color:{RUN_COLORS[(r - 1) % len(RUN_COLORS)]}'>&#9632;</span> {r}",
                    html.escape(data.name),
                    html.escape(os.path.abspath(data.directory)),
                    f"<span class='{kind}'>{html.escape(text)}</span>",
                    html.escape(f"{last.get('step', '-')}"),
                    str(len(data.findings)),
                ]
            )
        parts.append(_table(rows, ["run", "name", "model directory", "ended", "last step", "findings"]))
    else:
        data = runs[0]
        title = f"Run report: {os.path.abspath(data.directory)}"
        parts = [f"<h1>{html.escape(title)}</h1>", status_section(data)]
    pictures = _pictures(runs)
    if several:
        pictures.insert(1, ("Scores by wall time", wall_time_figure(runs)))
    for heading, svg in pictures:
        parts.append(f"<h2>{heading}</h2>")
        parts.append(_hover_titles(svg) if svg else "<p>Not recorded in this run.</p>")
    if several:
        parts.append("<h2>Options that differ between the runs</h2>")
        parts.append(options_section(runs))
        for r, data in enumerate(runs, start=1):
            parts.append(f"<h2>Run {r}: {html.escape(data.name)}</h2>")
            parts.append(status_section(data))
            parts.append("<h3>Findings</h3>")
            parts.append(findings_section(data, run_number=r))
    else:
        parts.append("<h2>Findings</h2>")
        parts.append(findings_section(runs[0]))
        parts.append("<h2>Options that differ from the defaults</h2>")
        parts.append(options_section(runs))
        attention = attention_figures(os.path.join(runs[0].directory, "attention.npz"))
        if attention:
            parts.append("<h2>Attention weights of the first dev batch (first sequence)</h2>")
            for name, svg in attention:
                parts.append(f"<h3>{html.escape(name)}</h3>{svg}")
    return _page(title, parts)
