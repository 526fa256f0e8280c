"""The documentation builds with Sphinx, warnings counted as errors (unescaped RST, broken includes)."""

from __future__ import annotations

import os

from sphinx.cmd.build import build_main

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_sphinx_builds_the_docs_without_warnings(tmp_path):
    assert build_main(["-W", "-q", "-b", "html", os.path.join(ROOT, "docs"), str(tmp_path)]) == 0
    page = (tmp_path / "from_returnn.html").read_text(encoding="utf-8")
    assert "cleanup_old_models" in page and "behavior_version" in page  # the generated table is included
