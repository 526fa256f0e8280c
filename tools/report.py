#!/usr/bin/env python3
"""Write MODEL_DIR/report.html: one self-contained page (no network, no server) that shows a run.

MODEL_DIR is the directory of the run's checkpoints (the 'model' prefix's directory). The page
draws what the run wrote there: every loss and error of train and dev on one global-step axis,
the applied learning rate, gradient norms per layer group (every debug_grad_health updates),
memory, the findings as numbered markers on the curves and as a list with their evidence, the
options that differ from the defaults, and with report_attention the attention weights of the
first dev batch. Exit status: 0, or 2 when MODEL_DIR holds no run's files.
"""

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from framework.tools.tool_args import ToolParser  # noqa: E402


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = ToolParser(__file__, __doc__, takes_config=False, usage_tail="MODEL_DIR")
    parser.add_argument("directory", metavar="MODEL_DIR", help="the directory of the run's checkpoints")
    return parser.parse_tool_args(argv)


def main(args: argparse.Namespace) -> int:
    from framework.disk import write_atomically
    from framework.errors import FrameworkError
    from framework.tools.run_report import REPORT_NAME, render

    path = os.path.join(args.directory, REPORT_NAME)
    try:
        page = render(args.directory).encode("utf-8")
        write_atomically(path, lambda f: f.write(page), "the run report", "Free space or choose another directory.")
    except FrameworkError as exc:
        print(f"{exc}", file=sys.stderr)
        return exc.exit_code
    print(f"Wrote {path} ({len(page) / 1024:.0f} KB): open it in a browser.")
    return 0


if __name__ == "__main__":
    sys.exit(main(parse_args(sys.argv[1:])))
