"""``report.html``: one self-contained page that shows a run from the files it left in its model directory.

It reads ``metrics.jsonl`` (framework.debug.run_metrics), ``findings.jsonl`` (framework.core.run_findings)
and, where the run wrote it, ``attention.npz`` (``report_attention``), and draws static SVG pictures
with matplotlib (Agg backend, no display): every score of train and dev on one global-step axis
(train per step and per epoch, dev per epoch), the applied learning rate, gradient norms per layer
group, memory, each finding as a numbered marker on the curves and in a list with its evidence,
the options that differ from the defaults, and attention heatmaps of the first dev batch. The page
needs no network and no server: the pictures are inline SVG.
"""

from __future__ import annotations

import html
import io
import json
import math
import os
from collections import defaultdict
from typing import Any

import matplotlib

matplotlib.use("Agg")  # no display: a file, never a window
import matplotlib.pyplot as plt  # noqa: E402

from framework.errors import ConfigError  # noqa: E402

REPORT_NAME = "report.html"
COLORS = {"error": "#c62828", "warning": "#ef6c00", "note": "#757575"}  # finding markers by severity
DATASET_COLORS = ("#2e7d32", "#6a1b9a", "#00838f", "#8d6e63")  # dev, then other datasets (train is blue)


def read_jsonl(path: str) -> list[dict[str, Any]]:
    """The JSON objects of ``path``, one per line; a line a killed run left half-written is skipped."""
    if not os.path.exists(path):
        return []
    records = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            try:
                records.append(json.loads(line))
            except json.JSONDecodeError:
                continue
    return records


class RunData:
    """What a model directory's metrics and findings files say, the latest record winning where a resumed run
    repeated steps."""

    def __init__(self, directory: str):
        self.directory = directory
        metrics = read_jsonl(os.path.join(directory, "metrics.jsonl"))
        self.findings = read_jsonl(os.path.join(directory, "findings.jsonl"))
        if not metrics and not self.findings:
            raise ConfigError(
                f"{directory} holds no metrics.jsonl and no findings.jsonl: it is not the model directory of a "
                f"training run (the directory of the 'model' checkpoint prefix), or the run had metrics_file = False."
            )
        self.runs = [r for r in metrics if r["kind"] == "run"]
        self.steps = {}  # global step -> {"step", "epoch", "lr", "losses": {name: value}}
        for r in metrics:
            if r["kind"] == "steps":  # columns of the steps written at once
                for i, step in enumerate(r["step"]):
                    losses = {name: values[i] for name, values in r["losses"].items()}
                    self.steps[step] = {"step": step, "epoch": r["epoch"][i], "lr": r["lr"][i], "losses": losses}
        self.epochs = {r["epoch"]: r for r in metrics if r["kind"] == "epoch"}
        self.memory = {r["step"]: r for r in metrics if r["kind"] == "memory"}
        self.scalars: dict[str, dict[int, float]] = defaultdict(dict)
        for record in metrics:
            if record["kind"] == "scalars":
                for tag, value in record["values"].items():
                    self.scalars[tag][record["step"]] = value

    def score_names(self) -> list[str]:
        names: dict[str, None] = {}
        for record in self.steps.values():
            names.update(dict.fromkeys(record["losses"]))
        for record in self.epochs.values():
            for values in record["scores"].values():
                names.update(dict.fromkeys(values))
        return list(names)

    def grad_norm_groups(self) -> dict[str, dict[int, float]]:
        """Gradient norms per layer group (the module a parameter belongs to): the root of the summed squares."""
        groups: dict[str, dict[int, float]] = defaultdict(lambda: defaultdict(float))
        for tag, values in self.scalars.items():
            if not tag.startswith("grad_health/grad_norm/"):
                continue
            group = tag.removeprefix("grad_health/grad_norm/").rpartition(".")[0] or "(model)"
            for step, norm in values.items():
                groups[group][step] += norm * norm
        return {g: {s: math.sqrt(v) for s, v in sorted(by_step.items())} for g, by_step in groups.items()}


def _svg(fig: Any) -> str:
    buffer = io.StringIO()
    fig.savefig(buffer, format="svg", bbox_inches="tight")
    plt.close(fig)
    text = buffer.getvalue()
    return text[text.index("<svg") :]  # inline: without the XML prolog and doctype


def _mark_findings(ax: Any, findings: list[dict[str, Any]], top: bool) -> None:
    """A dashed line at each finding's step, numbered as in the list; notes are left out of the curves."""
    for number, finding in enumerate(findings, start=1):
        if finding.get("severity") == "note" or finding.get("step") is None:
            continue
        color = COLORS.get(finding["severity"], "black")
        ax.axvline(finding["step"], color=color, linestyle="--", linewidth=1)
        if top:
            ax.annotate(
                str(number),
                (finding["step"], 1.0),
                xycoords=("data", "axes fraction"),
                color=color,
                fontsize=9,
                ha="center",
                va="bottom",
            )


def curves_figure(data: RunData) -> str:
    """One panel per score (loss or error): train per step, train and dev per epoch, findings as markers."""
    names = data.score_names()
    if not names:
        return ""
    fig, axes = plt.subplots(len(names), 1, figsize=(9, 2.6 * len(names)), sharex=True, squeeze=False)
    steps = sorted(data.steps)
    for i, (ax, name) in enumerate(zip(axes[:, 0], names, strict=True)):
        xs = [s for s in steps if name in data.steps[s]["losses"]]
        if xs:
            ax.plot(
                xs, [data.steps[s]["losses"][name] for s in xs], color="#90caf9", linewidth=0.8, label="train (step)"
            )
        datasets = sorted({d for r in data.epochs.values() for d in r["scores"]}, key=lambda d: d != "train")
        others = iter(DATASET_COLORS)
        for dataset in datasets:
            points = sorted(
                (r["step"], r["scores"][dataset][name])
                for r in data.epochs.values()
                if name in r["scores"].get(dataset, {})
            )
            if points:
                color = "#1565c0" if dataset == "train" else next(others, None)
                ax.plot(*zip(*points, strict=True), marker="o", color=color, label=f"{dataset} (epoch)")
        _mark_findings(ax, data.findings, top=i == 0)
        ax.set_ylabel(name)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8, loc="upper right")
    axes[-1, 0].set_xlabel("global step")
    return _svg(fig)


def lines_figure(series: dict[str, dict[int, float]], ylabel: str, data: RunData, log_scale: bool = False) -> str:
    """Curves over the global step, one per entry of ``series``, with the findings as markers."""
    series = {k: v for k, v in series.items() if v}
    if not series:
        return ""
    fig, ax = plt.subplots(figsize=(9, 3))
    for label, values in series.items():
        xs = sorted(values)
        ax.plot(xs, [values[x] for x in xs], marker="." if len(xs) < 50 else None, label=label)
    _mark_findings(ax, data.findings, top=True)
    if log_scale and all(v > 0 for values in series.values() for v in values.values()):
        ax.set_yscale("log")
    ax.set_xlabel("global step")
    ax.set_ylabel(ylabel)
    ax.grid(alpha=0.3)
    if len(series) > 1:
        ax.legend(fontsize=8, ncol=2 if len(series) > 6 else 1, loc="best")
    return _svg(fig)


def attention_figures(path: str) -> list[tuple[str, str]]:
    """``(module name, svg)`` per attention module in ``attention.npz``: the heads of the first sequence."""
    if not os.path.exists(path):
        return []
    import numpy as np

    figures = []
    with np.load(path) as saved:
        for name in saved.files:
            weights = saved[name]  # [heads, queries, keys] of the first sequence of the first dev batch
            heads = weights.shape[0]
            columns = min(heads, 4)
            rows = -(-heads // columns)
            fig, axes = plt.subplots(rows, columns, figsize=(2.4 * columns, 2.4 * rows), squeeze=False)
            for h in range(rows * columns):
                ax = axes[h // columns, h % columns]
                ax.set_axis_off()
                if h < heads:
                    ax.imshow(weights[h], cmap="viridis", aspect="auto", interpolation="nearest")
                    ax.set_title(f"head {h}", fontsize=8)
            figures.append((name, _svg(fig)))
    return figures


def _table(rows: list[list[str]], head: list[str]) -> str:
    cells = "".join(f"<th>{html.escape(h)}</th>" for h in head)
    body = "".join("<tr>" + "".join(f"<td>{c}</td>" for c in row) + "</tr>" for row in rows)
    return f"<table><tr>{cells}</tr>{body}</table>"


def findings_section(findings: list[dict[str, Any]]) -> str:
    if not findings:
        return "<p>No findings: every check that ran was quiet.</p>"
    rows = []
    for number, f in enumerate(findings, start=1):
        details = [html.escape(f.get("message", "")).replace("\n", "<br>")]
        for key in ("evidence", "where"):
            if f.get(key):
                details.append(
                    f"<div class='k'>{key}: <code>{html.escape(json.dumps(f[key], default=str))}</code></div>"
                )
        for key in ("fix", "option"):
            if f.get(key):
                details.append(f"<div class='k'>{key}: {html.escape(str(f[key]))}</div>")
        severity = html.escape(f.get("severity", ""))
        rows.append(
            [
                str(number),
                f"<span class='sev {severity}'>{severity}</span>",
                html.escape(f.get("check", "")),
                html.escape(f"epoch {f.get('epoch')}, step {f.get('step')}"),
                "".join(details),
            ]
        )
    return _table(rows, ["#", "severity", "check", "when", "cause, evidence, where, fix, option"])


STYLE = """
body { font-family: sans-serif; margin: 2em auto; max-width: 1100px; color: #212121; }
h1 { font-size: 1.5em; } h2 { font-size: 1.2em; margin-top: 1.6em; border-bottom: 1px solid #ddd; }
table { border-collapse: collapse; width: 100%; font-size: 0.9em; }
td, th { border: 1px solid #ddd; padding: 4px 6px; vertical-align: top; text-align: left; }
code { font-size: 0.9em; word-break: break-all; } .k { color: #555; margin-top: 3px; }
.sev { font-weight: bold; } .error { color: #c62828; } .warning { color: #ef6c00; } .note { color: #757575; }
svg { max-width: 100%; height: auto; }
"""


def render(directory: str) -> str:
    """The page of the run in ``directory``, as HTML text."""
    data = RunData(directory)
    parts = [f"<h1>Run report: {html.escape(os.path.abspath(directory))}</h1>"]
    last = data.runs[-1] if data.runs else {}
    counts = defaultdict(int)
    for finding in data.findings:
        counts[finding.get("severity", "?")] += 1
    summary = ", ".join(f"{n} {s}{'s' if n > 1 else ''}" for s, n in counts.items()) or "none"
    final = data.steps[max(data.steps)] if data.steps else {}
    parts.append(
        f"<p>{len(data.runs)} run(s) of this model (resumed runs continue the files); last step {final.get('step', '-')}, "
        f"epoch {final.get('epoch', '-')}. Findings: {html.escape(summary)}.</p>"
    )
    sections = [
        ("Scores of train and dev", curves_figure(data)),
        (
            "Applied learning rate",
            lines_figure({"learning rate": {s: r["lr"] for s, r in data.steps.items()}}, "learning rate", data),
        ),
        (
            "Gradient norms per layer group",
            lines_figure(data.grad_norm_groups(), "gradient norm", data, log_scale=True),
        ),
        (
            "Memory",
            lines_figure(
                {
                    "process RSS (MB)": {s: r["rss_mb"] for s, r in data.memory.items()},
                    "accelerator allocated (MB)": {
                        s: r["device_mb"] for s, r in data.memory.items() if r.get("device_mb") is not None
                    },
                },
                "MB",
                data,
            ),
        ),
    ]
    for title, svg in sections:
        parts.append(f"<h2>{title}</h2>")
        parts.append(svg or "<p>Not recorded in this run.</p>")
    parts.append("<h2>Findings</h2>")
    parts.append(findings_section(data.findings))
    options = last.get("options") or {}
    parts.append("<h2>Options that differ from the defaults</h2>")
    parts.append(
        _table([[html.escape(k), f"<code>{html.escape(v)}</code>"] for k, v in options.items()], ["option", "value"])
        if options
        else "<p>None recorded.</p>"
    )
    attention = attention_figures(os.path.join(directory, "attention.npz"))
    if attention:
        parts.append("<h2>Attention weights of the first dev batch (first sequence)</h2>")
        for name, svg in attention:
            parts.append(f"<h3>{html.escape(name)}</h3>{svg}")
    body = "\n".join(parts)
    return (
        f"<!DOCTYPE html>\n<html><head><meta charset='utf-8'><title>Run report</title><style>{STYLE}</style></head>"
        f"<body>\n{body}\n</body></html>\n"
    )
