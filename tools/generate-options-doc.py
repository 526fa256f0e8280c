#!/usr/bin/env python3
"""Write docs/options.rst from the option registry (framework/base/options.py) and docs/returnn_options.inc
from the table of RETURNN's options (framework/base/returnn_options.py). With --check, write nothing and
exit 1 if a file is stale.
"""

import argparse
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from framework.base.options_doc import format_returnn_rst, format_rst  # noqa: E402
from framework.tool_args import ToolParser  # noqa: E402

PAGES = {
    os.path.join(ROOT, "docs", "options.rst"): format_rst,
    os.path.join(ROOT, "docs", "returnn_options.inc"): format_returnn_rst,
}


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = ToolParser(__file__, __doc__, takes_config=False, usage_tail="[--check]")
    parser.add_argument("--check", action="store_true", help="write nothing; exit 1 if a file is stale")
    return parser.parse_tool_args(argv)


def main(args: argparse.Namespace) -> int:
    stale = False
    for path, render in PAGES.items():
        text = render()
        if args.check:
            with open(path, encoding="utf-8") as f:
                if f.read() != text:
                    print(f"{path} is stale; run python tools/generate-options-doc.py", file=sys.stderr)
                    stale = True
            continue
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)
        print(f"wrote {path}")
    return 1 if stale else 0


if __name__ == "__main__":
    sys.exit(main(parse_args(sys.argv[1:])))
