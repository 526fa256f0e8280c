#!/usr/bin/env python3
"""Startup time and peak memory of a run over many variable-length sequences.

For each number of sequences, random features (8 per frame, 5-50 frames per sequence) are
written once as one flat ``.npy`` plus offsets. Then ``python rnn.py`` trains a linear model
over them, in a fresh process per case, in two ways: memory-mapped (``NumpyDataset`` with
``{"values": path, "offsets": path}``) and as a Python list of arrays in RAM (what a config
holds without memory mapping; building the list is part of its startup). Printed: when the first
training step started (the run's own "First step starts" line), and the process's peak RSS.
"""

import argparse
import os
import re
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from framework.tool_args import ToolParser  # noqa: E402

CONFIG = """
import numpy as np
from torch import nn

storage = {storage!r}
values, offsets = {values!r}, {offsets!r}
if storage == "mmap":
    features = {{"values": values, "offsets": offsets}}
else:  # a list in RAM, as a config without memory mapping would hold it
    flat, bounds = np.load(values), np.load(offsets)
    features = [flat[a:b] for a, b in zip(bounds[:-1], bounds[1:])]
train = {{"class": "NumpyDataset", "arrays": {{"data": features}}, "partition_epoch": {parts}}}
extern_data = {{"data": {{"shape": (None, 8), "dtype": "float32"}}}}
batching = "laplace:.1000"
batch_size = 5000
num_epochs = 1
optimizer = {{"class": "adam"}}
learning_rate = 1e-3
log_verbosity = 5
torch_num_threads = 1


def get_model(**_kwargs):
    return nn.Linear(8, 8)


def train_step(*, model, extern_data, run_ctx, **_kwargs):
    run_ctx.mark_as_loss(name="mse", loss=(model(extern_data["data"]) ** 2).mean())
"""


# rnn.py's main, then the peak RSS of this process (ru_maxrss is in kB on Linux).
RUN_AND_REPORT_RSS = f"""
import resource, sys
sys.path.insert(0, {ROOT!r})
from framework.cli import main
code = main(sys.argv[1:])
print(f"peak RSS {{resource.getrusage(resource.RUSAGE_SELF).ru_maxrss}} kB")
sys.exit(code)
"""


def write_data(directory: str, num_seqs: int) -> tuple[str, str]:
    import numpy as np

    values, offsets = (
        os.path.join(directory, f"values.{num_seqs}.npy"),
        os.path.join(directory, f"offsets.{num_seqs}.npy"),
    )
    if not os.path.exists(offsets):
        rng = np.random.default_rng(0)
        bounds = np.concatenate([[0], np.cumsum(rng.integers(5, 51, num_seqs))])
        np.save(values, rng.standard_normal((bounds[-1], 8), dtype=np.float32))
        np.save(offsets, bounds)
    return values, offsets


def run_case(directory: str, num_seqs: int, storage: str) -> tuple[float, float]:
    """(seconds from process start to the first step, peak RSS in MB) of one fresh ``rnn.py`` run."""
    values, offsets = write_data(directory, num_seqs)
    config = os.path.join(directory, "config.py")
    with open(config, "w") as f:
        f.write(CONFIG.format(storage=storage, values=values, offsets=offsets, parts=max(num_seqs // 200, 1)))
    command = [sys.executable, "-c", RUN_AND_REPORT_RSS, config, "++model", repr(f"{directory}/m")]
    result = subprocess.run(command, cwd=directory, capture_output=True, text=True)
    first = re.search(r"First step starts (\S+) sec", result.stdout)
    rss = re.search(r"^peak RSS (\d+) kB$", result.stdout, re.MULTILINE)
    if result.returncode != 0 or not first or not rss:
        sys.exit(f"{storage} with {num_seqs} sequences failed:\n{result.stdout[-2000:]}\n{result.stderr[-2000:]}")
    for name in os.listdir(directory):
        if name.startswith("m."):
            os.remove(os.path.join(directory, name))
    return float(first.group(1)), int(rss.group(1)) / 1024


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = ToolParser(__file__, __doc__, takes_config=False, usage_tail="[--seqs 10000 100000 1000000] [--dir DIR]")
    parser.add_argument("--seqs", type=int, nargs="+", default=[10_000, 100_000, 1_000_000])
    parser.add_argument("--dir", help="where the data files go (kept for later runs); default: a temporary directory")
    return parser.parse_tool_args(argv)


def main(args: argparse.Namespace) -> None:
    directory = args.dir or tempfile.mkdtemp(prefix="benchmark-data-")
    os.makedirs(directory, exist_ok=True)
    print(f"{'sequences':>10} {'storage':>8} {'first step (s)':>15} {'peak RSS (MB)':>14}")
    for num_seqs in args.seqs:
        for storage in ("mmap", "list"):
            seconds, rss = run_case(directory, num_seqs, storage)
            print(f"{num_seqs:>10} {storage:>8} {seconds:>15.2f} {rss:>14.0f}", flush=True)


if __name__ == "__main__":
    main(parse_args(sys.argv[1:]))
