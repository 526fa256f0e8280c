#!/usr/bin/env python3
"""Measure how many collected RETURNN configs (tests/returnn/configs/*.config) start and train here, and which
option lines a user still has to change, per half of the collection (tests/returnn/configs/manifest.tsv: the
development half and the held-out half, split by author).

Each config runs with ``rnn.py config ++device 'cpu' ++num_epochs 1`` (the configs ask for a GPU or hundreds of
epochs) in a fresh directory. When the run stops with a config error (exit 2), the option lines the message names
are taken out (a top-level assignment), and the config runs again, until it trains or fails otherwise. Prints,
per config, the result and the lines taken out, then per half: trains as written, trains after deleting named
lines, stops (a config error that names no line to delete), breaks (any other failure). A forward or recognition
config (task "forward", 43-54) "trains" when its forward run ends with exit 0 (its callback or hooks check and write
their outputs; the data, checkpoint and model are stand-ins, as for the training configs). ``--root`` runs another
checkout's rnn.py on the same configs (the state before a change).
"""

from __future__ import annotations

import ast
import glob
import os
import re
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from framework.tool_args import ToolParser  # noqa: E402

CONFIGS = os.path.join(ROOT, "tests", "returnn", "configs")
OUTCOMES = ("trains as written", "trains after deleting named lines", "stops", "breaks")


def read_manifest(path: str) -> dict[str, str]:
    """config file name -> its half ('development' or 'held-out') from the collection's manifest."""
    halves = {}
    with open(path, encoding="utf-8") as f:
        for line in f:
            if line.startswith("#") or line.startswith("config\t") or not line.strip():
                continue
            name, _author, half, _source = line.rstrip("\n").split("\t")
            halves[name] = half
    return halves


def outcome(result: str) -> str:
    """Which of OUTCOMES a result of ``measure`` is."""
    if result == "trains":
        return OUTCOMES[0]
    if result == "trains after changes":
        return OUTCOMES[1]
    return OUTCOMES[2] if result in ("stops (exit 2)", "gave up") else OUTCOMES[3]


# The stand-ins' lines (data and model code), never the author's: a message that names one is no line to delete.
STAND_INS = {
    "train",
    "dev",
    "eval_datasets",
    "get_model",
    "train_step",
    "forward_step",
    "forward",
    "forward_data",
    "load",
}


def refused_names(message: str, source: str) -> list[str]:
    """The top-level names of ``source`` (the stand-ins' aside) that a config error ``message`` names."""
    assigned = {name: span for name, span in _assignments(source).items() if name not in STAND_INS}
    quoted = set(re.findall(r"'(\w+)'", message)) | set(re.findall(r"\+\+(\w+)", message))
    quoted |= set(re.findall(r"option (\w+)", message))
    return sorted(name for name in quoted if name in assigned)


def _assignments(source: str) -> dict[str, tuple[int, int]]:
    spans = {}
    for node in ast.parse(source).body:
        targets = (
            node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(node, ast.AnnAssign) else []
        )
        for target in targets:
            if isinstance(target, ast.Name):
                spans[target.id] = (node.lineno, node.end_lineno)
    return spans


def take_out(source: str, names: list[str]) -> str:
    """``source`` with the assignments of ``names`` commented out."""
    lines = source.split("\n")
    for name in names:
        start, end = _assignments("\n".join(lines))[name]
        for i in range(start - 1, end):
            lines[i] = "# taken out: " + lines[i]
    return "\n".join(lines)


def measure(path: str, root: str, timeout: float) -> tuple[str, list[str], str]:
    """(result, lines taken out, last output) of one config."""
    with open(path, encoding="utf-8") as f:
        source = f.read()
    taken: list[str] = []
    with tempfile.TemporaryDirectory() as work:
        env = dict(os.environ, FIXTURE_OUT=work, OMP_NUM_THREADS="1", PYTHONPATH=CONFIGS + os.pathsep + root)
        for _ in range(30):
            config = os.path.join(work, os.path.basename(path))
            with open(config, "w", encoding="utf-8") as f:
                f.write(source)
            launcher = [sys.executable]
            if "\ntorch_distributed = " in source:  # one process under torchrun, as its multi-GPU setup runs
                launcher += ["-m", "torch.distributed.run", "--nproc_per_node=1", "--standalone"]
            command = [*launcher, os.path.join(root, "rnn.py"), config, "++device", "'cpu'", "++num_epochs", "1"]
            try:
                run = subprocess.run(command, cwd=work, env=env, capture_output=True, text=True, timeout=timeout)
            except subprocess.TimeoutExpired:
                return "timeout", taken, ""
            output = run.stdout + run.stderr
            if run.returncode == 0:
                return ("trains" if not taken else "trains after changes"), taken, output
            errors = "\n".join(line for line in output.splitlines() if line.startswith("ERROR: "))
            names = refused_names(errors, source)  # a config error names them
            if not names:
                return ("stops (exit 2)" if run.returncode == 2 else f"fails (exit {run.returncode})"), taken, output
            taken.extend(names)
            source = take_out(source, names)
    return "gave up", taken, output


def main() -> int:
    parser = ToolParser(__file__, __doc__, takes_config=False, usage_tail="[--root DIR] [--timeout S] [config ...]")
    parser.add_argument("--root", default=ROOT, help="the checkout whose rnn.py runs the configs")
    parser.add_argument("--timeout", type=float, default=300)
    parser.add_argument("--half", choices=("development", "held-out"), help="only the configs of this half")
    parser.add_argument("configs", nargs="*", help="default: every tests/returnn/configs/*.config")
    args = parser.parse_args()
    halves = read_manifest(os.path.join(CONFIGS, "manifest.tsv"))
    paths = args.configs or sorted(glob.glob(os.path.join(CONFIGS, "*.config")))
    paths = [p for p in paths if args.half is None or halves.get(os.path.basename(p)) == args.half]
    counts: dict[str, dict[str, int]] = {}
    for path in paths:
        result, taken, output = measure(path, os.path.abspath(args.root), args.timeout)
        half = halves.get(os.path.basename(path), "not in the manifest")
        counts.setdefault(half, dict.fromkeys(OUTCOMES, 0))[outcome(result)] += 1
        print(f"{os.path.basename(path)} [{half}]: {result}; lines deleted: {len(taken)} {' '.join(taken)}", flush=True)
        if outcome(result) in OUTCOMES[2:]:
            print("    " + "\n    ".join(output.strip().splitlines()[-4:]), flush=True)
    for half, numbers in sorted(counts.items()):
        total = sum(numbers.values())
        print(f"{half} ({total} configs): " + ", ".join(f"{name} {n}" for name, n in numbers.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
