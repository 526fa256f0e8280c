"""A statement that computes a new tensor or module and throws it away (``debug_discarded_results``, on by default).

Most tensor operations return a new tensor and leave their input as it was: ``x.masked_fill(mask, -inf)`` changes
nothing about ``x``, ``x.masked_fill_(mask, -inf)`` does. ``nn.Embedding.from_pretrained`` is a class method that
builds a new layer; called on the model's own layer as a statement, it builds one and drops it. Such a statement has
no effect whatever the model, so it can only be a mistake: the user meant the in-place variant or an assignment.

At startup, the source of the user's code is read (no step runs): the config files, and the files that define
``get_model``, ``train_step`` and the model's classes (not installed libraries). Every expression statement that
calls one of the out-of-place tensor methods below, or one of torch's functions of the same kind, without
``inplace=True`` or ``out=``, is reported with its file and line. Names that also mean an in-place method of Python's
own types (``add``, ``sort``, ``log``, ``update``) are not judged.
"""

from __future__ import annotations

import ast
import inspect
import os
import sys
import sysconfig
import tokenize
from typing import Any

from framework.base.config import Config
from framework.base.findings import Finding, report
from framework.base.options import register
from framework.core.events import Event
from framework.core.plugin import Plugin, on
from framework.core.state import RunState

register(
    "debug_discarded_results",
    "bool",
    True,
    "At startup: statements in the user's code that call an out-of-place tensor operation (masked_fill, clamp, "
    "from_pretrained, ...) and throw its result away, so that they change nothing.",
    __name__,
)

# Tensor methods that return a new tensor (their in-place twin ends with "_"), and class methods that build a new
# object: as a statement of their own, each does nothing.
OUT_OF_PLACE_METHODS = frozenset(
    """masked_fill masked_scatter index_fill index_add index_copy clamp clamp_min clamp_max sub mul div pow exp
    sqrt rsqrt abs neg sigmoid tanh relu softmax log_softmax unsqueeze squeeze transpose permute reshape view
    contiguous detach clone flip type_as expand narrow nan_to_num masked_select float_power
    from_pretrained""".split()
)
# Functions of torch and torch.nn.functional that return a new tensor.
OUT_OF_PLACE_FUNCTIONS = frozenset(
    """masked_fill clamp clip sigmoid tanh relu softmax log_softmax dropout normalize pad interpolate cat stack where
    unsqueeze squeeze transpose permute reshape layer_norm gelu silu leaky_relu elu""".split()
)
TORCH_PREFIXES = ("torch", "F", "nn.functional", "torch.nn.functional", "functional")
# Modules whose functions share these names (numpy's take the output array as a positional argument): not judged.
OTHER_MODULES = frozenset("np numpy math jnp jax tf random re os pd scipy".split())


def _dotted(node: ast.AST) -> str:
    """``a.b.c`` of an attribute chain of names ('' for anything else)."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
        return ".".join(reversed(parts))
    return ""


def discarded_calls(source: str, flags: dict[str, bool] | None = None) -> list[tuple[int, str, str]]:
    """(line, statement, operation) of every statement of ``source`` that calls an out-of-place operation and throws
    its result away. ``flags``: names with a bool value (the config's ``bug = True``, ``use_pretrained = False``): of
    an ``if`` on one of them alone, only the branch taken is judged."""
    flags = flags or {}
    found = []

    def taken(test: ast.expr) -> bool | None:
        negated = isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not)
        name = test.operand if negated else test
        if isinstance(name, ast.Name) and isinstance(flags.get(name.id), bool):
            return flags[name.id] != negated
        return None

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.If) and (branch := taken(node.test)) is not None:
            for child in node.body if branch else node.orelse:
                visit(child)
            return
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Call) and (name := _thrown_away(node.value)):
            found.append((node.lineno, " ".join((ast.get_source_segment(source, node) or name).split()), name))
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(ast.parse(source))
    return found


def _thrown_away(call: ast.Call) -> str:
    """The out-of-place operation ``call`` makes, as a statement of its own ('' for other calls)."""
    func = call.func
    if any(k.arg in ("inplace", "out") for k in call.keywords) or not isinstance(func, ast.Attribute):
        return ""
    owner = _dotted(func.value)
    if owner in OTHER_MODULES:
        return ""
    if func.attr == "from_pretrained" and owner.split(".")[-1][:1].isupper():
        return ""  # called on a class (AutoModel.from_pretrained(name) to fetch the weights): not on a layer
    names = OUT_OF_PLACE_FUNCTIONS if owner in TORCH_PREFIXES else OUT_OF_PLACE_METHODS
    return func.attr if func.attr in names else ""


def user_files(config: Config, state: RunState) -> list[str]:
    """The config files and the files of the user's code the run calls (not installed libraries, not this
    framework)."""
    objects: list[Any] = [config.get("get_model"), config.get("train_step"), config.get("forward_step")]
    if state.model is not None:
        objects += [c for c in type(state.model).__mro__ if c.__module__ not in ("builtins",)]
        objects += [type(m) for m in state.model.modules()]
    files = list(config.files)
    for obj in objects:
        obj = getattr(obj, "func", obj)  # functools.partial: the function it wraps
        try:
            path = inspect.getsourcefile(obj) if obj is not None else None
        except TypeError:
            path = None
        if path and path not in files:
            files.append(path)
    framework = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    library_roots = {sysconfig.get_path(name) for name in ("stdlib", "platstdlib", "purelib", "platlib")}
    library_roots |= {p for p in sys.path if "site-packages" in p or "dist-packages" in p}
    return [
        path
        for path in files
        if os.path.isfile(path)
        and not os.path.abspath(path).startswith(framework + os.sep)
        and not any(os.path.abspath(path).startswith(os.path.abspath(root) + os.sep) for root in library_roots)
    ]


class DiscardedResults(Plugin):
    """Reports statements of the user's code whose out-of-place operation's result is thrown away."""

    bug_check = ("debug_discarded_results",)

    @classmethod
    def from_config(cls, config: Config, state: RunState) -> DiscardedResults | None:
        return cls() if config.bool("debug_discarded_results") else None

    @on(Event.STARTUP)
    def find(self, state: RunState) -> None:
        config = state.config
        # the config's own flags decide the branches of its files (a twin's `if bug:` is not run)
        flags = {n: v for n in config.namespace if isinstance(v := config.get(n), bool)}
        for path in user_files(config, state):
            try:
                with tokenize.open(path) as f:  # the file's own encoding (a coding cookie)
                    calls = discarded_calls(f.read(), flags if path in config.files else {})
            except (OSError, SyntaxError, UnicodeDecodeError, RecursionError, ValueError, MemoryError):
                continue  # code the parser cannot read here is not judged
            for line, statement, name in calls:
                twin = (
                    "it is a class method that builds a new object and leaves the one it is called on as it was"
                    if name == "from_pretrained"
                    else f"it returns a new tensor and leaves its input as it was ({name}_ changes the input)"
                )
                report(
                    Finding(
                        "warning",
                        "sanity check",
                        f"{path}:{line}: `{statement}` throws away what {name} returns: {twin}, so the statement "
                        f"changes nothing.",
                        evidence={"statement": statement, "operation": name},
                        where={"file": path, "line": line},
                        fix=f"Assign the result (x = x.{name}(...)), or use the in-place variant where one exists.",
                        option="debug_discarded_results = False",
                    )
                )


PLUGINS = (DiscardedResults,)
