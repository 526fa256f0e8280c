#!/usr/bin/env python3
"""Show what a config's dataset delivers: keys, shapes, dtypes, value ranges, labels, sequence lengths.

Looks at the first N batches of epoch 1 as the training would see them (after extern_data's dtype
conversion): per key its batch shapes, dtype, min/max/mean/std over the real (unpadded) values,
NaN/Inf counts, for sparse keys a histogram of the classes, and for variable-length keys the
sequence-length statistics. Nothing is trained or written.
"""

import argparse
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from framework.tool_args import ToolParser  # noqa: E402


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = ToolParser(__file__, __doc__, usage_tail="[--dataset NAME] [--batches N]")
    parser.add_argument(
        "--dataset", default="train", metavar="NAME", help="dataset option: train, dev, eval, or an eval_datasets name"
    )
    parser.add_argument(
        "--batches", type=int, default=4, metavar="N", help="how many batches to look at (default: %(default)s)"
    )
    return parser.parse_tool_args(argv)


if __name__ == "__main__":
    ARGS = parse_args(sys.argv[1:])  # before importing torch: --help and usage errors answer at once

import numpy as np  # noqa: E402
import torch  # noqa: E402

from framework.base.config import load_config  # noqa: E402
from framework.base.config import parse_args as parse_config_args  # noqa: E402
from framework.base.errors import FrameworkError  # noqa: E402
from framework.check_library.data_checks import valid_values  # noqa: E402
from framework.core.build import init_data  # noqa: E402


def describe_key(key, batches) -> list[str]:
    """The lines for one key."""
    shapes = sorted({tuple(raw[key.name].shape) for _, raw in batches})
    values = valid_values(key.name, batches)
    lines = [
        f"{key.name}: {key.dtype}, batch shapes {', '.join(str(list(s)) for s in shapes[:4])}"
        + (" ..." if len(shapes) > 4 else "")
    ]
    if values.size:
        as_float = values.astype(np.float64)
        finite = np.isfinite(as_float)
        shown = as_float[finite]
        lines.append(
            f"  values: min {shown.min():.4g}, max {shown.max():.4g}, mean {shown.mean():.4g}, std {shown.std():.4g}"
            + (f"; {int((~finite).sum())} NaN/Inf" if not finite.all() else "")
        )
    if key.sparse_dim is not None and values.size:
        counts = np.bincount(values.astype(np.int64).ravel().clip(0, key.sparse_dim - 1), minlength=key.sparse_dim)
        total = counts.sum()
        lines.append("  histogram: " + ", ".join(f"{c}: {n} ({n / total:.1%})" for c, n in enumerate(counts)))
    if key.variable:
        lengths = np.concatenate([raw[key.name + ":seq_len"] for _, raw in batches])
        lines.append(
            f"  sequence lengths: min {lengths.min()}, max {lengths.max()}, mean {lengths.mean():.1f}, "
            f"median {np.median(lengths):.0f}; {int((lengths == 0).sum())} empty"
        )
    return lines


def main(args: argparse.Namespace) -> int:
    try:
        files, overrides = parse_config_args(args.config_args)
        config = load_config(files, {"device": "cpu", **overrides})
        extern_data, loaders = init_data(config, [args.dataset], required=args.dataset, device=torch.device("cpu"))
    except FrameworkError as exc:
        print(f"ERROR: {exc}", file=sys.stderr)
        return exc.exit_code
    loader = loaders[args.dataset]
    plan = loader.plan(1)
    batches = [(indices, loader.numpy_batch(indices)) for indices in plan[: args.batches]]
    print(
        f"Dataset {args.dataset}: {loader.dataset.name}, {loader.dataset.num_seqs} sequences, {len(plan)} batches "
        f"per epoch; the first {len(batches)} batches ({sum(len(i) for i, _ in batches)} sequences):"
    )
    for key in extern_data.values():
        print("\n".join(describe_key(key, batches)))
    return 0


if __name__ == "__main__":
    sys.exit(main(ARGS))
