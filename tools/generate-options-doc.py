#!/usr/bin/env python3
"""Write docs/options.rst from the option registry (framework/options.py).

python tools/generate-options-doc.py          # rewrite the file
python tools/generate-options-doc.py --check  # exit 1 if the file is stale
"""

import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from framework.options_doc import format_rst  # noqa: E402

PATH = os.path.join(ROOT, "docs", "options.rst")


def main() -> int:
    text = format_rst()
    if "--check" in sys.argv[1:]:
        with open(PATH, encoding="utf-8") as f:
            if f.read() != text:
                print(f"{PATH} is stale; run {sys.argv[0]}", file=sys.stderr)
                return 1
        return 0
    with open(PATH, "w", encoding="utf-8") as f:
        f.write(text)
    print(f"wrote {PATH}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
