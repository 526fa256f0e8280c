"""The documentation builds with Sphinx, warnings counted as errors (unescaped RST, broken includes)."""

from __future__ import annotations

import os

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_sphinx_builds_the_docs_without_warnings(tmp_path):
    from sphinx.cmd.build import build_main  # not at collection: every worker collects this file

    assert build_main(["-W", "-q", "-b", "html", os.path.join(ROOT, "docs"), str(tmp_path)]) == 0
    page = (tmp_path / "from_returnn.html").read_text(encoding="utf-8")
    assert "cleanup_old_models" in page and "behavior_version" in page  # the generated table is included
