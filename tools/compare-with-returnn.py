#!/usr/bin/env python3
"""Train tests/returnn/demo_torch.config here and its twin demo_torch_returnn.config with RETURNN
itself, on the same data (12AX written to RETURNN HDF files), and print both side by side:
per epoch the learning rate, the dev scores and the time per training step.

Needs a checkout of the repository (the two demo configs) and RETURNN with dm-tree, which its
PyTorch backend imports: ``pip install -e ".[returnn]"``. Both runs use one thread and run one after
the other; the order alternates with ``--rounds`` so that a busy machine hurts both alike. A failed
run keeps its directory, whose log the error names.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from framework.tool_args import ToolParser  # noqa: E402

OURS = os.path.join(ROOT, "tests", "returnn", "demo_torch.config")
THEIRS = os.path.join(ROOT, "tests", "returnn", "demo_torch_returnn.config")


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = ToolParser(__file__, __doc__, takes_config=False, usage_tail="[--epochs 5] [--rounds 1]")
    parser.add_argument("--epochs", type=int, default=5)
    parser.add_argument("--rounds", type=int, default=1, help="runs of each; the order alternates")
    args = parser.parse_tool_args(argv)
    missing = [
        name for name, module in (("returnn", "returnn"), ("dm-tree", "tree")) if not importlib.util.find_spec(module)
    ]
    if missing:
        parser.error(f'needs {" and ".join(missing)}, which the returnn extra installs: pip install -e ".[returnn]"')
    if not all(map(os.path.isfile, (OURS, THEIRS))):
        parser.error(f"needs the demo configs of a checkout of the repository: {OURS} is missing")
    return args


if __name__ == "__main__":
    ARGS = parse_args(sys.argv[1:])  # before importing torch: --help and usage errors answer at once

import numpy as np  # noqa: E402

from framework.datasets.hdf import write_hdf  # noqa: E402
from framework.datasets.task12ax import Task12AXDataset  # noqa: E402
from framework.training.lr_file import read_lr_file  # noqa: E402


def write_data(out: str) -> None:
    """12AX train (1000 sequences) and dev (100) as RETURNN HDF: one-hot data, int32 classes."""
    for name, num_seqs, seed in (("train", 1000, 7), ("dev", 100, 1)):
        dataset = Task12AXDataset(num_seqs=num_seqs, fixed_random_seed=seed)
        seqs = [dataset.get_seq(i) for i in range(num_seqs)]
        outputs = {
            "data": [np.eye(9, dtype=np.float32)[s["data"]] for s in seqs],
            "classes": [s["classes"].astype(np.int32) for s in seqs],
        }
        write_hdf(f"{out}/{name}.hdf", outputs, [f"{name}-{i}" for i in range(num_seqs)], "data", {"classes": 2})


def run(command: list[str], out: str, log_name: str) -> str:
    env = dict(os.environ, DEMO_OUT=out, OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
    result = subprocess.run(command, cwd=out, env=env, capture_output=True, text=True, timeout=1800)
    with open(f"{out}/{log_name}", "w") as f:
        f.write(result.stdout + result.stderr)
    if result.returncode != 0:
        tail = "\n".join(f"  {line}" for line in (result.stdout + result.stderr).splitlines()[-15:])
        raise SystemExit(
            f"{' '.join(command)} failed ({result.returncode}); its last lines:\n{tail}\nall in {out}/{log_name}"
        )
    return result.stdout + result.stderr


def ours(out: str, epochs: int) -> dict[int, dict[str, float]]:
    data = {k: f"{{'class': 'HDFDataset', 'files': ['{out}/{k}.hdf']}}" for k in ("train", "dev")}
    text = run(
        [sys.executable, os.path.join(ROOT, "rnn.py"), OURS, "++num_epochs", str(epochs), "++train", data["train"]]
        + ["++dev", data["dev"]],
        out,
        "ours.log",
    )
    epochs_seen = {}
    for m in re.finditer(r"Epoch (\d+) train: .*?, (\d+) steps, ([\d.]+) sec, lr ([\d.e-]+)", text):
        epochs_seen[int(m[1])] = {"lr": float(m[4]), "sec_per_step": float(m[3]) / int(m[2])}
    for m in re.finditer(r"Epoch (\d+) evaluation: dev: ce ([\d.]+) fer ([\d.]+)", text):
        epochs_seen[int(m[1])].update(dev_ce=float(m[2]), dev_fer=float(m[3]))
    return epochs_seen


def theirs(out: str, epochs: int) -> dict[int, dict[str, float]]:
    text = run(
        [sys.executable, "-c", "import sys, returnn.__main__ as m; m.main(sys.argv)", THEIRS]
        + ["++num_epochs", str(epochs)],
        out,
        "returnn.log",
    )
    lrs, _ = read_lr_file(f"{out}/learning_rates")
    epochs_seen = {}
    for m in re.finditer(r"Epoch (\d+): Trained (\d+) steps, (\d+):(\d+):(\d+) elapsed", text):
        seconds = int(m[3]) * 3600 + int(m[4]) * 60 + int(m[5])
        epochs_seen[int(m[1])] = {"lr": lrs[int(m[1])], "sec_per_step": seconds / int(m[2])}
    for m in re.finditer(r"Epoch (\d+) evaluation: dev: ce ([\d.]+) fer ([\d.]+)", text):
        epochs_seen[int(m[1])].update(dev_ce=float(m[2]), dev_fer=float(m[3]))
    steps = [float(s) for s in re.findall(r"ep \d+ train, step \d+, .*?([\d.]+) sec/step", text)]
    for values in epochs_seen.values():
        values["compute_per_step"] = statistics.median(steps)
    return epochs_seen


def main(args: argparse.Namespace) -> None:
    results: dict[str, list[dict[int, dict[str, float]]]] = {"ours": [], "RETURNN": []}
    tmp = tempfile.mkdtemp(prefix="compare-with-returnn-")  # kept when a run fails: its error names a log in it
    for round_ in range(args.rounds):
        order = [("ours", ours), ("RETURNN", theirs)]
        for name, fn in order if round_ % 2 == 0 else order[::-1]:
            out = f"{tmp}/{name}{round_}"
            os.makedirs(out)
            write_data(out)
            results[name].append(fn(out, args.epochs))
    shutil.rmtree(tmp)
    for name, runs in results.items():
        print(f"{name} (round 1):")
        print("  epoch  lr        dev ce  dev fer  sec/step (wall, epoch)")
        for epoch, v in sorted(runs[0].items()):
            print(f"  {epoch:5d}  {v['lr']:<8.4g}  {v['dev_ce']:.3f}   {v['dev_fer']:.3f}    {v['sec_per_step']:.4f}")
    wall = {n: statistics.median(v["sec_per_step"] for r in runs for v in r.values()) for n, runs in results.items()}
    print(f"median wall time per training step: ours {wall['ours']:.4f} s, RETURNN {wall['RETURNN']:.4f} s")
    compute = statistics.median(v["compute_per_step"] for r in results["RETURNN"] for v in r.values())
    print(f"RETURNN's own sec/step (computation only, its step lines): {compute:.4f} s")


if __name__ == "__main__":
    main(ARGS)
