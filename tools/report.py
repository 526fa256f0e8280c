#!/usr/bin/env python3
"""Write MODEL_DIR/report.html: one self-contained page (no network, no server) that shows a run;
with several MODEL_DIRs, one page that compares the runs.

MODEL_DIR is the directory of the run's checkpoints (the 'model' prefix's directory). Every training
run writes its page there itself (report_html = True, the default): at each epoch's end and at its
end, however it ends; this command writes it again, e.g. after a run was killed. The page says how
the run ended (the failure and where, as a finding), when it ran and was resumed, and the command
that reproduces it; it draws every loss and error of train and dev on one global-step axis, the
applied learning rate, gradient norms per layer group (every debug_grad_health updates), memory,
the findings as numbered markers on the curves and as a list with their evidence, the options that
differ from the defaults, and with report_attention the attention weights of the first dev batch.

With several MODEL_DIRs, the page (--output, default ./report-compare.html) overlays the runs' curves
on one step axis, one colour per run, draws their scores per epoch by wall-clock time, tables the
options that differ between them and lists each run's findings.

Exit status: 0; 2 when a MODEL_DIR holds no run's files or one of them cannot be trusted (a link, not
a regular file, a damaged line: the message names the file and line); 130 on Ctrl-C.
"""

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from framework.tool_args import ToolParser  # noqa: E402

COMPARE_NAME = "report-compare.html"


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = ToolParser(__file__, __doc__, takes_config=False, usage_tail="MODEL_DIR [MODEL_DIR ...] [--output PAGE]")
    parser.add_argument("directories", metavar="MODEL_DIR", nargs="+", help="the directory of a run's checkpoints")
    parser.add_argument(
        "--output",
        metavar="PAGE",
        help=f"where to write the page (default: MODEL_DIR/report.html; of several runs: ./{COMPARE_NAME})",
    )
    return parser.parse_tool_args(argv)


def main(args: argparse.Namespace) -> int:
    try:
        return _write(args)
    except KeyboardInterrupt:
        print("report: interrupted (Ctrl-C); no page was written.", file=sys.stderr)
        return 130


def _write(args: argparse.Namespace) -> int:
    from framework.base.disk import write_atomically
    from framework.base.errors import FrameworkError
    from framework.run_files import RunData

    several = len(args.directories) > 1
    path = args.output or (COMPARE_NAME if several else os.path.join(args.directories[0], "report.html"))
    try:
        runs = [RunData(directory) for directory in args.directories]  # damaged files are refused before drawing
        from framework.run_report import render_runs

        page = render_runs(runs).encode("utf-8")
        write_atomically(path, lambda f: f.write(page), "the run report", "Free space or choose another --output.")
    except FrameworkError as exc:
        print(f"{exc}", file=sys.stderr)
        return exc.exit_code
    print(f"Wrote {path} ({len(page) / 1024:.0f} KB): open it in a browser.")
    return 0


if __name__ == "__main__":
    sys.exit(main(parse_args(sys.argv[1:])))
