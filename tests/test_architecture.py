"""The layout shows the architecture: no import cycles, the core never imports a diagnostic, the
development harness is outside the installed package, and only the engine writes engine state."""

from __future__ import annotations

import ast
import functools
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


@functools.cache
def _tree(path: str) -> ast.Module:
    """A module's syntax tree, parsed once for this file's tests (all of framework/: about 1.5 s of CPU)."""
    with open(path, encoding="utf-8") as f:
        return ast.parse(f.read(), path)


def _imports(name: str, path: str) -> set[str]:
    """Every framework module ``name`` imports: at the top level, in functions, under ``TYPE_CHECKING``, and
    module names written as strings (imported later by name, or run with ``python -m``).

    The one string that is not an import is an option's ``component`` in ``register(...)``: it labels who
    reads the option (for the options reference) and is never imported.
    """
    tree = _tree(path)
    labels = set()  # the component strings, also through a variable such as options.py's _C
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and ast.unparse(node.func) in ("register", "options.register"):
            labels.update(
                ast.unparse(n) for n in node.args[4:5] + [k.value for k in node.keywords if k.arg == "component"]
            )
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and any(ast.unparse(t) in labels for t in node.targets):
            labels.add(ast.unparse(node.value))
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module:
            base = node.module
            targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in MODULES else base for a in node.names]
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and ast.unparse(node) not in labels:
            targets = [node.value] if "." in node.value else []  # a bare "framework" is a word, not an import
        else:
            continue
        found.update(t for t in targets if t in MODULES and t != name)
    return found - {name for label in labels for name in MODULES if label == repr(name)}


@functools.cache
def import_graph() -> dict[str, set[str]]:
    """Module -> the framework modules it imports (parsed when a test first asks: not at collection)."""
    return {name: _imports(name, path) for name, path in MODULES.items()}


# The layers, lowest first, one folder each: a module may import only from its own folder and those below it.
LAYERS = (
    "framework.base",  # errors, options, config, log, findings, files, disk, devices
    "framework.datasets",
    "framework.core",
    "framework.check_library",  # what the checks share: probe sessions, replay, dependency maps, contracts
    "framework.training",  # the engine and what changes what is trained
    "framework.debug",  # the checks and other diagnostics, one plugin module each
    "framework",  # top: the entry points (the package itself, cli, commands, the tools' library, the test harness)
)


def package_of(module: str) -> str:
    """The folder a module lives in, as a dotted name (a package's ``__init__`` lives in its own folder)."""
    return module if MODULES[module].endswith("__init__.py") else module.rpartition(".")[0]


def layer_of(module: str) -> int:
    return LAYERS.index(package_of(module))


def _components(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of ``graph`` with more than one node (Tarjan), each sorted."""
    index, low, stack, on_stack, cycles = {}, {}, [], set(), []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in graph.get(node, ()):
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

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return cycles


def package_graph() -> dict[tuple[str, str], list[tuple[str, str]]]:
    """(importing package, imported package) -> the module pairs that make that edge."""
    edges: dict[tuple[str, str], list[tuple[str, str]]] = {}
    for name, targets in import_graph().items():
        for target in targets:
            pair = (package_of(name), package_of(target))
            if pair[0] != pair[1]:
                edges.setdefault(pair, []).append((name, target))
    return {pair: sorted(pairs) for pair, pairs in edges.items()}


def report() -> str:
    """The package graph (edges, mutual pairs, packages in cycles) and the modules in import cycles."""
    edges = package_graph()
    mutual = sorted({tuple(sorted(e)) for e in edges if (e[1], e[0]) in edges})
    packages = {p: {b for a, b in edges if a == p} for p, _ in edges}
    lines = [f"package edges: {len(edges)}"]
    lines += [f"  {a} -> {b} ({len(pairs)}: {pairs[0][0]} -> {pairs[0][1]})" for (a, b), pairs in sorted(edges.items())]
    lines.append(f"mutual pairs: {len(mutual)} {mutual}")
    lines.append(f"packages in cycles: {_components(packages)}")
    modules = _components(import_graph())
    lines.append(f"modules in import cycles: {sum(map(len, modules))}")
    lines += [f"  {component}" for component in modules]
    return "\n".join(lines)


def test_no_import_cycles():
    assert _components(import_graph()) == []


def test_each_layer_imports_only_from_those_below():
    """Counting every import (functions, TYPE_CHECKING, module names in strings); a back edge names both modules."""
    back_edges = [
        f"{name} -> {target}"
        for name, targets in sorted(import_graph().items())
        for target in sorted(targets)
        if layer_of(target) > layer_of(name)
    ]
    assert back_edges == []


def test_every_folder_is_a_layer():
    """A new folder must be given its place among the layers (and a folder of modules below a layer's is not one)."""
    assert sorted({package_of(m) for m in MODULES} - set(LAYERS)) == []


def test_package_graph_is_acyclic():
    """By folders, counting every import: no two folders import each other."""
    edges = package_graph()
    mutual = [
        f"{pairs[0][0]} -> {pairs[0][1]} and {edges[(b, a)][0][0]} -> {edges[(b, a)][0][1]}"
        for (a, b), pairs in edges.items()
        if (b, a) in edges and a < b
    ]
    assert mutual == []


@pytest.mark.parametrize("layer", ["framework.core", "framework.training", "framework.check_library"])
def test_lower_layers_never_import_diagnostics(layer):
    offenders = {
        name: sorted(t for t in targets if t.startswith("framework.debug"))
        for name, targets in import_graph().items()
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
        if name.startswith("framework.core.") or name == "framework.training.engine":
            continue
        for node in ast.walk(_tree(path)):
            targets = node.targets if isinstance(node, ast.Assign) else [getattr(node, "target", None)]
            for target in targets:
                if isinstance(target, ast.Attribute) and ast.unparse(target.value) == "state":
                    writers.append(f"{name}:{node.lineno} {ast.unparse(target)}")
            if isinstance(node, ast.Call) and ast.unparse(node.func) == "setattr" and node.args:
                if ast.unparse(node.args[0]) == "state":
                    writers.append(f"{name}:{node.lineno} setattr(state, ...)")
    assert writers == []


def test_bug_checks_declare_options_that_switch_them_off():
    """The benchmarks' "all checks off" set is derived from these declarations, so each must be a real switch."""
    from framework.assembly import plugin_classes
    from framework.base import options

    declared = {o: cls.name for cls in plugin_classes() for o in cls.bug_check}
    assert declared
    wrong = [
        f"{name}: {o}"
        for o, name in declared.items()
        if options.get(o) is None or options.get(o).type != "bool" or options.get(o).default is not True
    ]
    assert wrong == []


if __name__ == "__main__":  # python tests/test_architecture.py prints the measured graph
    print(report())
