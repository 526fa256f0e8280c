#!/usr/bin/env python3
"""Replay a training step that stopped on NaN/Inf, with every numerics check on.

    python tools/replay-step.py config.py [more.py ...] [++key value ...] model.nonfinite.ep002.step17.pt

Loads the parameters, batch and RNG state saved when training stopped, runs the config's
train_step on them forward and backward, and prints which module, op, source line, parameter
and batch entries produced the first NaN/Inf. Edit the config (e.g. add a clamp) and run this
again to check a fix on exactly the failing step. Exit status: 1 if non-finite values occur, 0 if
the step is clean now.
"""

import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from framework import log  # noqa: E402
from framework.checkpoint import load_checkpoint, load_model_state  # noqa: E402
from framework.config import load_config, parse_args  # noqa: E402
from framework.errors import FrameworkError  # noqa: E402


def main(argv: list[str]) -> int:
    if not argv or not argv[-1].endswith(".pt") or argv[0] in ("-h", "--help"):
        print(__doc__)
        return 2
    try:
        files, overrides = parse_args(argv[:-1])
        config = load_config(files, overrides)
        state = load_checkpoint(argv[-1])
        if "batch" not in state:
            raise FrameworkError(
                f"{argv[-1]} is a checkpoint, not a saved step (no 'batch'); give a *.nonfinite.*.pt file."
            )
        log.setup(config.get("log_verbosity"))

        from framework import build
        from framework.datasets.loader import to_device
        from framework.debug.replay import replay_step
        from framework.state import RunState

        device = build.select_device(config.get("device"))
        run = RunState(
            config=config, task="train", device=device, epoch=state["epoch"], global_step=state["global_step"]
        )
        run.model = build.build_model(config, device, epoch=state["epoch"], step=state["global_step"])
        load_model_state(run.model, state["model"], argv[-1])
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
    sys.exit(main(sys.argv[1:]))
