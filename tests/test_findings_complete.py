"""Every warning and error a check reports is complete (issue 51, item 2): it says the numbers behind it
(``evidence``) and what to do (``fix``), not only a message.

An AST scan of ``framework/``: each ``Finding(...)`` call whose severity is "warning" or "error", or not a
literal (a severity chosen at run time may be either), must pass ``evidence=`` and ``fix=`` with something in
them (not ``{}`` or ``""``). A site where nothing is known, or that is not ours to change, is listed in
``ALLOWED`` with the reason; the list is kept short, and an entry that no longer matches a site fails too.
"""

from __future__ import annotations

import ast
import functools
from dataclasses import dataclass
from pathlib import Path

from conftest import ROOT

FRAMEWORK = Path(ROOT) / "framework"

# (path under framework/, enclosing function) -> why the site may lack evidence or fix. Keep it short.
ALLOWED: dict[tuple[str, str], str] = {}


@dataclass
class Site:
    """One ``Finding(...)`` call: where it is and which of the fields it fills."""

    path: str  # under framework/
    function: str  # the enclosing Class.function
    line: int
    severity: str | None  # None: not a literal
    filled: set[str]


def _filled(value: ast.expr) -> bool:
    """Whether a keyword's value can hold something: not the literal ``{}``, ``""`` or None."""
    if isinstance(value, ast.Dict):
        return bool(value.keys)
    if isinstance(value, ast.Constant):
        return bool(value.value)
    return True


def finding_sites(root: Path) -> list[Site]:
    """Every ``Finding(...)`` call under ``root`` but those that rebuild a stored record (``Finding(**record)``)."""
    sites = []
    for path in sorted(root.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        scopes: dict[ast.AST, str] = {}
        for node in ast.walk(tree):  # the qualified name of each function, for the allowlist's keys
            if isinstance(node, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
                for child in ast.iter_child_nodes(node):
                    if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                        scopes[child] = f"{scopes.get(node, node.name)}.{child.name}"
        stack: list[tuple[ast.AST, str]] = [(tree, "")]
        while stack:
            node, scope = stack.pop()
            if isinstance(node, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
                scope = scopes.get(node, node.name)
            if isinstance(node, ast.Call):
                func = node.func
                name = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""
                if name == "Finding" and all(k.arg is not None for k in node.keywords):
                    first = (
                        node.args[0]
                        if node.args
                        else next((k.value for k in node.keywords if k.arg == "severity"), None)
                    )
                    literal = isinstance(first, ast.Constant) and isinstance(first.value, str)
                    sites.append(
                        Site(
                            str(path.relative_to(root)),
                            scope,
                            node.lineno,
                            first.value if literal else None,
                            {k.arg for k in node.keywords if _filled(k.value)},
                        )
                    )
            stack.extend((child, scope) for child in ast.iter_child_nodes(node))
    return sites


@functools.cache
def framework_sites() -> tuple[Site, ...]:
    """The scan of framework/, once for the two tests that read it (parsing every module: about 3 s of CPU)."""
    return tuple(finding_sites(FRAMEWORK))


def incomplete(sites: list[Site] | tuple[Site, ...]) -> list[Site]:
    """The warning and error sites (and those of a severity chosen at run time) without evidence or fix."""
    return [s for s in sites if s.severity != "note" and not {"evidence", "fix"} <= s.filled]


def test_every_warning_and_error_site_fills_evidence_and_fix():
    sites = framework_sites()
    assert len(sites) > 50  # the scan sees the checks' sites (a broken scan would pass on nothing)
    missing = [s for s in incomplete(sites) if (s.path, s.function) not in ALLOWED]
    assert not missing, "Finding(...) without evidence= or fix=:\n" + "\n".join(
        f"  framework/{s.path}:{s.line} ({s.function}, {s.severity or 'severity chosen at run time'}): lacks "
        f"{', '.join(sorted({'evidence', 'fix'} - s.filled))}"
        for s in missing
    )


def test_the_allowlist_names_only_sites_that_lack_something():
    """An entry whose site was completed (or moved) is dropped, so that the list stays short and true."""
    lacking = {(s.path, s.function) for s in incomplete(framework_sites())}
    assert not set(ALLOWED) - lacking, f"allowlisted but complete or gone: {sorted(set(ALLOWED) - lacking)}"


def test_the_scan_finds_a_site_without_evidence_or_fix(tmp_path):
    """The scan itself: a planted incomplete warning is named, a note and a complete warning are not."""
    (tmp_path / "check.py").write_text(
        "from framework.base.findings import Finding\n"
        "class Check:\n"
        "    def judge(self, n):\n"
        "        a = Finding('warning', 'c', 'half', evidence={'n': n})\n"
        "        b = Finding('note', 'c', 'a fact')\n"
        "        c = Finding('error', 'c', 'whole', evidence={'n': n}, fix='Do this.')\n"
        "        d = Finding('error' if n else 'warning', 'c', 'empty', evidence={}, fix='')\n"
        "        return Finding(**{'severity': 'note'})\n",
        encoding="utf-8",
    )
    found = incomplete(finding_sites(tmp_path))
    assert [(s.function, s.line, s.severity) for s in sorted(found, key=lambda s: s.line)] == [
        ("Check.judge", 4, "warning"),
        ("Check.judge", 7, None),
    ]
