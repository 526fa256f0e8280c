#!/usr/bin/env python3
"""Run K training steps twice from the same seed and name the first thing that differs.

Each run is a separate ``rnn.py`` process (so hash randomization, thread scheduling and data
loader workers can differ, as they do between real runs) with ``debug_fingerprint_file``: per
step, hashes of every batch key, module output (in execution order), gradient and parameter.
The runs write no checkpoints, logs or TensorBoard files. Prints the first differing entry
(batch key, module output, gradient or parameter) with its step and both runs' statistics, and
how many entries of that step differ. Exit status: 0 deterministic, 1 not, 2 bad usage.
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from framework.commands import RNN_SCRIPT  # noqa: E402
from framework.tool_args import ToolParser  # noqa: E402

# What the two runs must not touch: the config's checkpoints, logs and TensorBoard directory.
NO_SIDE_EFFECTS = ["++model", "None", "++log", "None", "++tensorboard_dir", "None", "++tf_log_dir", "None"]


def run_once(config_args: list[str], steps: int, path: str) -> subprocess.CompletedProcess:
    """One fingerprinting run of rnn.py."""
    command = [sys.executable, RNN_SCRIPT, *config_args, *NO_SIDE_EFFECTS]
    command += ["++task", "train", "++debug_fingerprint_file", path, "++debug_fingerprint_steps", str(steps)]
    return subprocess.run(command, capture_output=True, text=True, stdin=subprocess.DEVNULL)


def load(path: str) -> list[dict]:
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def compare(first: list[dict], second: list[dict]) -> str | None:
    """A report of the first difference, or None if the runs agree."""
    for step_a, step_b in zip(first, second, strict=False):
        a = {tuple(e[:2]): e for e in step_a["entries"]}
        b = {tuple(e[:2]): e for e in step_b["entries"]}
        order = [tuple(e[:2]) for e in step_a["entries"]] + [k for k in b if k not in a]
        differing = [k for k in order if a.get(k, [None] * 3)[2] != b.get(k, [None] * 3)[2]]
        if not differing:
            continue
        kind, name = differing[0]
        lines = [f"First difference at step {step_a['step']}: {kind} {name}."]
        for label, entry in (("run 1", a.get(differing[0])), ("run 2", b.get(differing[0]))):
            if entry is None:
                lines.append(f"  {label}: (absent: the runs took different paths through the model)")
            else:
                _, _, digest, shape, dtype, mean, absmax = entry
                lines.append(f"  {label}: {shape} {dtype}, mean {mean:.9g}, max |x| {absmax:.9g} (hash {digest})")
        kinds = {}
        for k in differing:
            kinds[k[0]] = kinds.get(k[0], 0) + 1
        summary = ", ".join(f"{n} {kind} entr{'y' if n == 1 else 'ies'}" for kind, n in kinds.items())
        lines.append(f"  In step {step_a['step']}, {summary} differ (of {len(order)}).")
        lines.append(_hint(kind))
        return "\n".join(lines)
    if len(first) != len(second):
        return f"The runs recorded a different number of steps: {len(first)} and {len(second)}."
    return None


def _hint(kind: str) -> str:
    return {
        "batch key": "  The data differs: look at the dataset's ordering and any randomness in loading "
        "(unseeded RNGs, set/dict iteration order, file listing order, DataLoader workers).",
        "module output": "  The computation differs from this module on: an unseeded random op, a nondeterministic "
        "kernel (torch.use_deterministic_algorithms(True) names it), or state kept between steps.",
        "gradient": "  Forward agrees but backward differs: nondeterministic backward kernels (scatter/index_add "
        "with atomics on CUDA); torch.use_deterministic_algorithms(True) names the op.",
        "parameter": "  Gradients agree but the update differs: look at the optimizer and learning-rate schedule.",
    }[kind]


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = ToolParser(__file__, __doc__, usage_tail="[--steps K]")
    parser.add_argument("--steps", type=int, default=5, metavar="K", help="training steps to compare (default 5)")
    return parser.parse_tool_args(argv)


def main(args: argparse.Namespace) -> int:
    with tempfile.TemporaryDirectory() as tmp:
        paths = [os.path.join(tmp, f"run{i}.jsonl") for i in (1, 2)]
        for i, path in enumerate(paths, start=1):
            result = run_once(args.config_args, args.steps, path)
            if result.returncode != 0:
                print(f"Run {i} failed (exit status {result.returncode}):\n{result.stdout}{result.stderr}")
                return result.returncode if result.returncode == 2 else 1
        first, second = load(paths[0]), load(paths[1])
    report = compare(first, second)
    if report is None:
        entries = len(first[0]["entries"]) if first else 0
        print(f"Deterministic: {len(first)} steps agree bit for bit ({entries} entries per step).")
        return 0
    print(report)
    return 1


if __name__ == "__main__":
    sys.exit(main(parse_args(sys.argv[1:])))
