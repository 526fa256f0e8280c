#!/usr/bin/env python3
"""Show what a checkpoint holds: metadata, every tensor's shape and statistics, NaN/Inf.

For a framework checkpoint: epoch, global step, learning rates and scores per epoch, optimizer
and RNG state entries, and the model's tensors; a plain state_dict works too. ``--all`` also lists
the optimizer's per-parameter state. Every record's CRC-32 is checked first: a damaged file is shown
all the same, under a warning. Exit status: 1 if the file is damaged or any tensor holds NaN/Inf, else 0.
"""

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from framework.tool_args import ToolParser  # noqa: E402


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = ToolParser(__file__, __doc__, takes_config=False, usage_tail="checkpoint.pt [--all]")
    parser.add_argument("path", metavar="checkpoint.pt", help="a framework checkpoint or a plain state_dict")
    parser.add_argument("--all", action="store_true", help="also the optimizer's per-parameter state")
    return parser.parse_tool_args(argv)


if __name__ == "__main__":
    ARGS = parse_args(sys.argv[1:])  # before importing torch: --help and usage errors answer at once

import torch  # noqa: E402

from framework.training.checkpoint_integrity import damage  # noqa: E402
from framework.training.lr_control import nested_scores  # noqa: E402


def tensor_line(name: str, t: torch.Tensor, width: int) -> tuple[str, bool]:
    """``name  [shape] dtype  mean std min max`` and whether it holds NaN/Inf."""
    line = f"{name:<{width}}  {str(list(t.shape)):<14} {str(t.dtype).removeprefix('torch.'):<8}"
    if t.numel() == 0 or not (t.is_floating_point() or t.is_complex()):
        return line + (f"  value {t.item()}" if t.numel() == 1 else ""), False
    values = t.detach().double()
    finite = torch.isfinite(values)
    shown = values[finite]
    stats = (
        f"  mean {float(shown.mean()):+.4g} std {float(shown.std()) if shown.numel() > 1 else 0.0:.4g} "
        f"min {float(shown.min()):+.4g} max {float(shown.max()):+.4g}"
        if shown.numel()
        else ""
    )
    bad = int((~finite).sum())
    return line + stats + (f"  {bad} NaN/Inf!" if bad else ""), bool(bad)


def main(args: argparse.Namespace) -> int:
    try:
        problem = damage(args.path)
        state = torch.load(args.path, map_location="cpu", weights_only=True)
    except Exception as exc:
        print(f"ERROR: {args.path} cannot be read as a checkpoint ({type(exc).__name__}: {exc}).", file=sys.stderr)
        return 2
    if problem:
        print(f"WARNING: {args.path} is damaged: {problem}. What follows is what it holds now, not what was written.")
    if isinstance(state, dict) and "model" in state:
        model = state["model"]
        print(f"{args.path}: framework checkpoint, epoch {state.get('epoch')}, global step {state.get('global_step')}")
        for key in ("next_step", "imported_from"):
            if key in state:
                print(f"  {key}: {state[key]}")
        control = state.get("learning_rate_control") or {}
        for epoch, lr in sorted((control.get("epoch_lrs") or {}).items()):
            scores = nested_scores((control.get("scores") or {}).get(epoch, {}))
            print(
                f"  epoch {epoch}: lr {lr:g}  "
                + " ".join(
                    f"{dataset}_{name} {v:.4g}" for dataset, values in scores.items() for name, v in values.items()
                )
            )
        extra = [k for k in state if k not in ("model", "epoch", "global_step", "learning_rate_control")]
        print(f"  other entries: {', '.join(extra)}")
    else:
        model = state
        print(f"{args.path}: a state_dict")
    tensors = {k: v for k, v in model.items() if isinstance(v, torch.Tensor)}
    if args.all and isinstance(state.get("optimizer"), dict):
        for index, entry in state["optimizer"].get("state", {}).items():
            tensors.update({f"optimizer.state.{index}.{k}": v for k, v in entry.items() if isinstance(v, torch.Tensor)})
    width = max((len(k) for k in tensors), default=10)
    bad = []
    for name, t in tensors.items():
        line, has_bad = tensor_line(name, t, width)
        print(line)
        if has_bad:
            bad.append(name)
    total = sum(t.numel() for k, t in model.items() if isinstance(t, torch.Tensor))
    print(
        f"{len(model)} model tensors, {total:,} values" + (f"; NaN/Inf in {', '.join(bad)}" if bad else "; all finite")
    )
    return 1 if bad or problem else 0


if __name__ == "__main__":
    sys.exit(main(ARGS))
