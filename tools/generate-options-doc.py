#!/usr/bin/env python3
"""Write docs/options.rst from the option registry (framework/options.py) and docs/returnn_options.inc
from the table of RETURNN's options (framework/returnn_options.py).

python tools/generate-options-doc.py          # rewrite the files
python tools/generate-options-doc.py --check  # exit 1 if a file is stale
"""

import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from framework.options_doc import format_returnn_rst, format_rst  # noqa: E402

PAGES = {
    os.path.join(ROOT, "docs", "options.rst"): format_rst,
    os.path.join(ROOT, "docs", "returnn_options.inc"): format_returnn_rst,
}


def main() -> int:
    stale = False
    for path, render in PAGES.items():
        text = render()
        if "--check" in sys.argv[1:]:
            with open(path, encoding="utf-8") as f:
                if f.read() != text:
                    print(f"{path} is stale; run {sys.argv[0]}", file=sys.stderr)
                    stale = True
            continue
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)
        print(f"wrote {path}")
    return 1 if stale else 0


if __name__ == "__main__":
    sys.exit(main())
