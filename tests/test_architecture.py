"""The layout shows the architecture: no import cycles, the core never imports a diagnostic, the
development harness is outside the installed package, and only the engine writes engine state."""

from __future__ import annotations

import ast
import os

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PACKAGE = os.path.join(ROOT, "framework")


def _modules() -> dict[str, str]:
    """Every module of the installed package: dotted name -> path."""
    found = {}
    for directory, _, files in os.walk(PACKAGE):
        for name in files:
            if name.endswith(".py"):
                path = os.path.join(directory, name)
                dotted = os.path.relpath(path, ROOT)[:-3].replace(os.sep, ".")
                found[dotted.removesuffix(".__init__")] = path
    return found


MODULES = _modules()


def _imports(name: str, path: str) -> set[str]:
    """The framework modules ``name`` imports anywhere (top level, in functions, under TYPE_CHECKING excluded)."""
    with open(path, encoding="utf-8") as f:
        tree = ast.parse(f.read(), path)
    type_only = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            type_only.update(id(n) for n in ast.walk(node))
    found = set()
    for node in ast.walk(tree):
        if id(node) in type_only:
            continue
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module:
            base = node.module
            targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in MODULES else base for a in node.names]
        else:
            continue
        found.update(t for t in targets if t in MODULES and t != name)
    return found


GRAPH = {name: _imports(name, path) for name, path in MODULES.items()}


def _packages_of(target: str) -> set[str]:
    """A module's parent packages (importing ``a.b.c`` runs ``a.b``'s __init__ too), excluding the root."""
    parts = target.split(".")
    return {".".join(parts[:i]) for i in range(2, len(parts))}


def test_no_import_cycles():
    index, low, stack, on_stack, cycles = {}, {}, [], set(), []

    def visit(node: str) -> None:  # Tarjan's strongly connected components
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in GRAPH[node]:
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                component.append(top)
                if top == node:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    for node in GRAPH:
        if node not in index:
            visit(node)
    assert cycles == []


@pytest.mark.parametrize("layer", ["framework.core", "framework.training", "framework.inspection"])
def test_lower_layers_never_import_diagnostics(layer):
    offenders = {
        name: sorted(t for t in targets if t.startswith("framework.debug"))
        for name, targets in GRAPH.items()
        if name.startswith(layer)
    }
    assert {n: t for n, t in offenders.items() if t} == {}


def test_harness_is_not_in_the_package():
    harness = {"preloaded", "doc_commands", "benchmarking"}
    assert not [name for name in MODULES if name.rpartition(".")[2] in harness]


def test_only_the_engine_writes_run_state():
    """Plugins act through state.control and the store; an assignment to a RunState field elsewhere is a defect."""
    writers = []
    for name, path in MODULES.items():
        if name.startswith("framework.core."):
            continue
        with open(path, encoding="utf-8") as f:
            tree = ast.parse(f.read(), path)
        for node in ast.walk(tree):
            targets = node.targets if isinstance(node, ast.Assign) else [getattr(node, "target", None)]
            for target in targets:
                if isinstance(target, ast.Attribute) and ast.unparse(target.value) == "state":
                    writers.append(f"{name}:{node.lineno} {ast.unparse(target)}")
            if isinstance(node, ast.Call) and ast.unparse(node.func) == "setattr" and node.args:
                if ast.unparse(node.args[0]) == "state":
                    writers.append(f"{name}:{node.lineno} setattr(state, ...)")
    assert writers == []
