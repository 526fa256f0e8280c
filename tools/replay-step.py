#!/usr/bin/env python3
"""Replay a training step that stopped on NaN/Inf, with every numerics check on.

Loads the parameters, batch and RNG state saved when training stopped, runs the config's
train_step on them forward and backward, and prints which module, op, source line, parameter
and batch entries produced the first NaN/Inf. Edit the config (e.g. add a clamp) and run this
again to check a fix on exactly the failing step. Exit status: 1 if non-finite values occur, 0 if
the step is clean now.
"""

import argparse
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from framework.tool_args import ToolParser  # noqa: E402


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = ToolParser(__file__, __doc__, usage_tail="model.nonfinite.ep002.step17.pt")
    args = parser.parse_tool_args(argv)
    if len(args.config_args) < 2 or not args.config_args[-1].endswith(".pt"):
        parser.error("the saved step comes last: the *.nonfinite.*.pt file that training wrote when it stopped")
    args.config_args, args.saved_step = args.config_args[:-1], args.config_args[-1]
    return args


if __name__ == "__main__":
    ARGS = parse_args(sys.argv[1:])  # before importing torch: --help and usage errors answer at once

from framework.base import log  # noqa: E402
from framework.base.config import load_config  # noqa: E402
from framework.base.config import parse_args as parse_config_args  # noqa: E402
from framework.base.errors import FrameworkError  # noqa: E402
from framework.core import build  # noqa: E402
from framework.core.state import RunState  # noqa: E402
from framework.datasets.loader import to_device  # noqa: E402
from framework.debug.replay import replay_step  # noqa: E402
from framework.training.checkpoint import load_checkpoint, load_model_state  # noqa: E402


def main(args: argparse.Namespace) -> int:
    try:
        files, overrides = parse_config_args(args.config_args)
        config = load_config(files, overrides)
        state = load_checkpoint(args.saved_step)
        if "batch" not in state:
            raise FrameworkError(
                f"{args.saved_step} is a checkpoint, not a saved step (no 'batch'); give a *.nonfinite.*.pt file."
            )
        log.setup(config.get("log_verbosity"))

        device = build.select_device(config.get("device"))
        run = RunState(
            config=config, task="train", device=device, epoch=state["epoch"], global_step=state["global_step"]
        )
        run.model = build.build_model(config, device, epoch=state["epoch"], step=state["global_step"])
        load_model_state(run.model, state["model"], args.saved_step)
        run.batch = to_device(state["batch"], device)
        run.batch_indices = state["seq_indices"].numpy()
    except FrameworkError as exc:
        print(f"ERROR: {exc}", file=sys.stderr)
        return exc.exit_code
    report = replay_step(
        run,
        state["rng"],
        nan_only=config.bool("debug_check_numerics_nan_only"),
        skip_patterns=list(config.get("debug_check_numerics_skip_modules") or []),
    )
    print(report.format())
    return 1 if report.reproduced else 0


if __name__ == "__main__":
    sys.exit(main(ARGS))
