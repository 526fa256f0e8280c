#!/usr/bin/env python3
"""Per-module activation statistics over a dataset: mean, std, min, max of every module's output.

Runs the model (``model(batch[first input key])``, in eval mode) on the first N batches of the
dataset and aggregates each module's floating outputs over all of them, in execution order: a dead
layer (all zero), a saturated one (constant), exploding scales or NaN/Inf stand out, and two such
dumps (e.g. before and after a change) can be diffed line by line.
"""

import argparse
import math
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from framework.tool_args import ToolParser  # noqa: E402


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = ToolParser(
        __file__, __doc__, usage_tail="[--checkpoint ckpt.pt] [--dataset NAME] [--batches N] [--train-mode]"
    )
    parser.add_argument(
        "--checkpoint",
        metavar="ckpt.pt",
        help="parameters for the model (default: its initial ones, with a note when training saved checkpoints)",
    )
    parser.add_argument("--dataset", default="dev", metavar="NAME", help="dataset option (default: %(default)s)")
    parser.add_argument("--batches", type=int, default=10, metavar="N", help="batches to run (default: %(default)s)")
    parser.add_argument("--train-mode", action="store_true", help="run in train mode (dropout etc.)")
    return parser.parse_tool_args(argv)


if __name__ == "__main__":
    ARGS = parse_args(sys.argv[1:])  # before importing torch: --help and usage errors answer at once

import torch  # noqa: E402

from framework.base.errors import FrameworkError  # noqa: E402
from framework.check_library.module_tracker import ModuleTracker  # noqa: E402
from framework.check_library.tensors import iter_tensors  # noqa: E402
from framework.tooling import case_from_argv, untrained_parameters_note  # noqa: E402


class Stats:
    """Running count, sum, sum of squares, min, max, non-finite count (float64)."""

    def __init__(self) -> None:
        self.count, self.sum, self.squares, self.nonfinite = 0, 0.0, 0.0, 0
        self.min, self.max = math.inf, -math.inf

    def add(self, t: torch.Tensor) -> None:
        values = t.detach().double()
        finite = torch.isfinite(values)
        self.nonfinite += int((~finite).sum())
        values = values[finite]
        if values.numel():
            self.count += values.numel()
            self.sum += float(values.sum())
            self.squares += float((values * values).sum())
            self.min, self.max = min(self.min, float(values.min())), max(self.max, float(values.max()))

    def line(self) -> str:
        if not self.count:
            return "no finite values"
        mean = self.sum / self.count
        std = math.sqrt(max(self.squares / self.count - mean * mean, 0.0))
        text = f"mean {mean:+.4g}  std {std:.4g}  min {self.min:+.4g}  max {self.max:+.4g}"
        return text + (f"  {self.nonfinite} NaN/Inf!" if self.nonfinite else "")


def main(args: argparse.Namespace) -> int:
    try:
        case = case_from_argv(
            args.config_args, dataset=args.dataset, num_batches=args.batches, checkpoint_path=args.checkpoint
        )
    except FrameworkError as exc:
        print(f"ERROR: {exc}", file=sys.stderr)
        return exc.exit_code
    note = untrained_parameters_note(case.config) if args.checkpoint is None else None
    if note:
        print(note, file=sys.stderr)
    key = case.input_key
    stats: dict[str, Stats] = {}

    def on_output(path, module, inputs, output):
        for i, t in enumerate(t for t in iter_tensors(output) if t.is_floating_point()):
            stats.setdefault(f"{path} ({type(module).__name__})" + (f" output {i}" if i else ""), Stats()).add(t)

    case.model.train(args.train_mode)
    torch.manual_seed(0)
    with torch.no_grad(), ModuleTracker(case.model, post_hook=on_output):
        for batch in case.batches:
            case.model(batch[key])
    width = max((len(name) for name in stats), default=10)
    print(
        f"Module outputs over {len(case.batches)} batches of {args.dataset} (model({key}), "
        f"{'train' if args.train_mode else 'eval'} mode, execution order):"
    )
    for name, s in stats.items():
        print(f"{name:<{width}}  {s.line()}")
    return 0


if __name__ == "__main__":
    sys.exit(main(ARGS))
