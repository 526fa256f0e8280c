"""Readable tracebacks.

By default (``compact_excepthook``): the user's own frames with the values of the variables in
their failing line, library frames (torch, the framework, the standard library) folded into one
line per run of them, the error, then the framework's note (module path, shapes, batch). Tensors
are one-line summaries (lovely-tensors: shape, stats) and modules their class and path, so the
model's repr never fills the screen. ``use_better_exchook = True`` prints better_exchook's full
dump instead: every frame, with its variables.

One library frame stays unfolded: where the library uses the user's settings. When a library
raises on what the user set (a classifier head left at ``num_labels=2`` for 4 classes, an
``nn.Embedding`` with fewer rows than the ids), the error names the symptom ("Target 3 is out of
bounds") and the line that names the cause is in the library. So of the library frames below
the innermost user frame, the innermost one whose failing statement reads one of the user's
values is shown with its statement and values (see ``_setting_frame``). Only the text changes:
the exception and its traceback stay as they are (``ipython --pdb``).
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import dataclasses
import enum
import functools
import inspect
import io
import keyword
import linecache
import os
import re
import sys
import textwrap
import tokenize
import traceback
import types
from collections.abc import Iterator
from typing import Any

import torch
from torch import nn

from framework.base.options import register
from framework.check_library.tensors import display_path, is_user_file, stats

register(
    "use_better_exchook",
    "bool",
    False,
    "Full tracebacks (better_exchook): every frame with its variables. Default: your frames only, library frames folded.",
    __name__,
)
register(
    "use_lovely_tensors",
    "bool",
    False,
    "Tensor reprs everywhere (logs, shells, tracebacks) are lovely-tensors summaries.",
    __name__,
)
register(
    "startup_callback",
    "callable | None",
    None,
    "startup_callback(config=config) is called once, early, e.g. to install your own tools.",
    __name__,
)


_VALUE_WIDTH = 160
_RNN_PY = os.path.realpath(os.path.join(os.path.dirname(__file__), "..", "..", "rnn.py"))


@contextlib.contextmanager
def compact_tensor_reprs() -> Iterator[None]:
    """Within the block, ``repr(tensor)`` is a one-line summary instead of its values."""
    original = torch.Tensor.__repr__
    torch.Tensor.__repr__ = lambda self, *args, **kwargs: stats(self)  # type: ignore[method-assign]
    try:
        yield
    finally:
        torch.Tensor.__repr__ = original  # type: ignore[method-assign]


def excepthook(etype: type[BaseException], value: BaseException, tb: Any) -> None:
    """``sys.excepthook``: better_exchook's extended traceback, compact tensors, then the notes."""
    import better_exchook

    with compact_tensor_reprs():
        better_exchook.better_exchook(
            etype, value, tb, autodebugshell=False, file=sys.stderr, with_color=sys.stderr.isatty()
        )
    for note in getattr(value, "__notes__", ()):
        print(note, file=sys.stderr)


def install_excepthook(full: bool = False) -> None:
    """Print uncaught exceptions compactly, or with better_exchook's full dump (``use_better_exchook``)."""
    sys.excepthook = excepthook if full else compact_excepthook


def compact_excepthook(etype: type[BaseException], value: BaseException, tb: Any) -> None:
    """``sys.excepthook``: the compact traceback (see the module doc) on stderr."""
    print(format_compact(value), file=sys.stderr, end="")


def show_compactly_in_ipython(exc: BaseException) -> None:
    """Under ``ipython rnn.py``, show ``exc`` with the compact traceback too.

    IPython formats an uncaught exception itself (its verbose traceback, a hundred lines for a shape
    error) and never calls ``sys.excepthook``; it prints what an exception's ``_render_traceback_``
    returns instead. Only that attribute is added: type, traceback and ``--pdb`` stay as they are.
    """
    ipython = sys.modules.get("IPython")
    if sys.excepthook is not compact_excepthook or ipython is None or ipython.get_ipython() is None:
        return
    with contextlib.suppress(AttributeError):  # an exception class without __dict__
        exc._render_traceback_ = lambda: format_compact(exc).rstrip("\n").split("\n")  # type: ignore[attr-defined]


def debugger_hint(tb: types.TracebackType | None) -> str | None:
    """How a post-mortem debugger gets from the frame that raised to the innermost frame of the user's code.

    ``python -m pdb`` and ``ipython --pdb`` open in the innermost frame, which for an error raised by
    torch (a shape error in ``Linear.forward``) is torch's; ``up N`` moves N frames out. None when
    the exception was raised in the user's code, or never passed through it.
    """
    entries = list(_walk(tb))
    user = [i for i, (summary, _) in enumerate(entries) if _is_user_frame(summary.filename)]
    if not user or user[-1] == len(entries) - 1:
        return None
    mine, raised = entries[user[-1]][0], entries[-1][0]
    return (
        f"  in a debugger (python -m pdb, ipython --pdb), which opens where it was raised ({_short(raised.filename)}:"
        f"{raised.lineno} in {raised.name}): up {len(entries) - 1 - user[-1]} reaches your code, "
        f"{display_path(mine.filename)}:{mine.lineno} in {mine.name}"
    )


def _walk(tb: types.TracebackType | None) -> Iterator[tuple[traceback.FrameSummary, types.TracebackType]]:
    """(summary, traceback entry) of each frame of ``tb``, outermost first."""
    while tb is not None:
        yield traceback.FrameSummary(tb.tb_frame.f_code.co_filename, tb.tb_lineno, tb.tb_frame.f_code.co_name), tb
        tb = tb.tb_next


def format_compact(exc: BaseException) -> str:
    """The compact traceback of ``exc``, with the exceptions it was chained from first (as Python does)."""
    parts = []
    if exc.__cause__ is not None:
        parts += [format_compact(exc.__cause__), "\nThe above exception was the direct cause of the following:\n\n"]
    elif exc.__context__ is not None and not exc.__suppress_context__:
        parts += [format_compact(exc.__context__), "\nDuring handling of the above exception, another occurred:\n\n"]
    lines = ["Traceback (most recent call last; library frames folded):"]
    entries = list(_walk(exc.__traceback__))
    user = [_is_user_frame(summary.filename) for summary, _ in entries]
    shown = _setting_frame(entries, user)
    folded: list[traceback.FrameSummary] = []
    for index, (summary, tb) in enumerate(entries):
        if user[index]:
            lines += _fold(folded) + _user_frame(summary, tb.tb_frame)
            folded = []
        elif shown is not None and index == shown[0]:
            lines += _fold(folded) + shown[1]
            folded = []
        else:
            folded.append(summary)
    lines += _fold(folded)
    name = type(exc).__qualname__
    module = type(exc).__module__
    name = name if module in ("builtins", "__main__") else f"{module}.{name}"
    lines.append(f"{name}: {exc}" if str(exc) else name)
    lines += [str(note) for note in getattr(exc, "__notes__", ())]
    return "".join(parts) + "\n".join(line.rstrip("\n") for line in lines) + "\n"


def _is_user_frame(filename: str) -> bool:
    own_script = os.path.realpath(filename) == _RNN_PY
    return is_user_file(filename) and not filename.startswith("<") and not own_script


def _fold(frames: list[traceback.FrameSummary]) -> list[str]:
    if not frames:
        return []
    where = [f"{_short(f.filename)}:{f.lineno} {f.name}" for f in (frames[0], frames[-1])]
    return [f"  ... {len(frames)} library frame(s): {where[0]}" + (f" ... {where[1]}" if len(frames) > 1 else "")]


def _short(filename: str) -> str:
    """``torch/nn/modules/linear.py`` for a file inside an installed package or the standard library."""
    parts = filename.replace(os.sep, "/").split("/")
    for anchor in ("site-packages", "dist-packages", "framework", "lib"):
        if anchor in parts:
            index = len(parts) - 1 - parts[::-1].index(anchor)
            return "/".join(parts[index + (anchor != "framework") :])
    return display_path(filename)


def _user_frame(summary: traceback.FrameSummary, frame: types.FrameType) -> list[str]:
    lines = [f'  File "{summary.filename}", line {summary.lineno}, in {summary.name}']
    source = (summary.line or "").strip()
    if source:
        lines.append(f"    {source}")
    for name in _names_in(source):
        if name in frame.f_locals:
            lines.append(f"      {name} = {_value(frame.f_locals[name])}")
    return lines


def _names_in(source: str) -> list[str]:
    """The identifiers of a line (also inside f-strings), in order, each once; attribute names left out."""
    names = []
    for name in re.findall(r"(?<![.\w])[A-Za-z_]\w*", source):
        if not keyword.iskeyword(name) and name not in names:
            names.append(name)
    return names


def _value(value: Any) -> str:
    if isinstance(value, torch.Tensor):
        return stats(value)
    if isinstance(value, torch.nn.Module):
        return f"<{type(value).__name__} module>"
    if isinstance(value, (types.ModuleType, types.FunctionType, types.BuiltinFunctionType, type)):
        return f"<{type(value).__name__} {getattr(value, '__name__', '')}>"
    with compact_tensor_reprs():
        try:
            text = repr(value)
        except Exception as exc:  # a broken __repr__ must not hide the real error
            text = f"<repr failed: {type(exc).__name__}>"
    text = " ".join(text.split())
    return text if len(text) <= _VALUE_WIDTH else text[: _VALUE_WIDTH - 3] + "..."


# The library frame that uses the user's settings (see _setting_frame).
_FRAMEWORK_DIR = os.path.realpath(os.path.join(os.path.dirname(__file__), "..")) + os.sep
_MODULE_STATE = frozenset(vars(nn.Module()))  # every module's bookkeeping (training, _parameters, ...): no setting
_MAX_VALUES = 8  # value lines under the library frame
_MISSING = object()


def _setting_frame(entries: list[tuple[traceback.FrameSummary, Any]], user: list[bool]) -> tuple[int, list[str]] | None:
    """(index, lines) of the library frame to show unfolded: where the library uses the user's settings.

    Candidates are the library frames below the innermost user frame, except the framework's own.
    The user's objects are what the user frames hold (their locals, and the globals of their
    files: the config): modules, with all their submodules and the config objects those keep
    (``self.config``, ``self.cfg``), and config objects (dataclass instances, classes named
    ``*Config`` such as transformers' ``PretrainedConfig``, namespaces). A frame uses them when its
    failing statement reads

    - a setting of one of them: ``self.num_labels``, ``self.config.vocab_size``, ``self.cfg.classes``
      (a number, string, dtype, or a tuple of them),
    - a parameter or buffer of one of their modules (``self.weight`` of the user's ``nn.Embedding``,
      whose shape is its setting), or
    - a local variable holding one of their settings under its name (``num_labels``, read from
      ``self.config.num_labels`` earlier in the function).

    The innermost such frame is shown: the statement where the library applies the user's value,
    usually right above the check that raised.
    """
    last_user = max((i for i, is_user in enumerate(user) if is_user), default=-1)
    candidates = [i for i in range(last_user + 1, len(entries)) if not _in_framework(entries[i][0].filename)]
    if last_user < 0 or not candidates:
        return None
    owned = _user_objects([entries[i][1].tb_frame for i in range(last_user + 1) if user[i]])
    for index in reversed(candidates):
        try:
            lines = _library_frame(entries[index][0], entries[index][1], owned)
        except Exception:  # a broken attribute or repr in library code must not hide the real error
            lines = []
        if lines:
            return index, lines
    return None


def _in_framework(filename: str) -> bool:
    return os.path.realpath(filename).startswith(_FRAMEWORK_DIR)


def _user_objects(frames: list[types.FrameType]) -> dict[int, Any]:
    """{id: object} of the modules and config objects that the user's frames hold (see ``_setting_frame``)."""
    owned: dict[int, Any] = {}
    for frame in frames:
        values = list(frame.f_locals.values())
        values += [v for k, v in frame.f_globals.items() if not k.startswith("__")]
        for value in values:
            if id(value) in owned:
                continue
            if isinstance(value, nn.Module):
                for module in value.modules():
                    owned[id(module)] = module
                    owned.update((id(v), v) for v in vars(module).values() if _is_config(v))
            elif _is_config(value):
                owned[id(value)] = value
    return owned


def _is_config(value: Any) -> bool:
    """An object that holds settings: a dataclass instance, a namespace, an instance of a ``*Config`` class."""
    if isinstance(value, type):
        return False
    if dataclasses.is_dataclass(value) or isinstance(value, (argparse.Namespace, types.SimpleNamespace)):
        return True
    return any(cls.__name__.endswith("Config") for cls in type(value).__mro__[:-1])


def _is_plain(value: Any) -> bool:
    """A setting's value: a number, string, dtype or enum, or a short tuple or list of them (not None)."""
    if isinstance(value, (bool, int, float, str, torch.dtype, enum.Enum)):
        return True
    return isinstance(value, (tuple, list)) and 0 < len(value) <= 16 and all(_is_plain(v) for v in value)


def _library_frame(summary: traceback.FrameSummary, tb: Any, owned: dict[int, Any]) -> list[str]:
    """The lines of a library frame whose failing statement uses the user's settings; [] when it uses none."""
    local_values = tb.tb_frame.f_locals
    holders = [v for v in local_values.values() if id(v) in owned]
    holders += [a for h in holders if isinstance(h, nn.Module) for a in vars(h).values() if id(a) in owned]
    statement = _statement(summary.filename, tb)
    defaults = _defaults(tb.tb_frame)
    shown: dict[str, Any] = {}  # what the statement reads, in order
    uses = False
    for chain in _chains_in(statement):
        names = chain.split(".")
        if names[0] not in local_values:
            continue
        owner = local_values[names[0]]
        if not _says_nothing(owner, defaults.get(names[0], _MISSING)):
            shown.setdefault(names[0], owner)
        if len(names) == 1:  # a local holding a setting under its own name
            uses = uses or (_is_plain(owner) and any(_equal(_attribute(h, chain), owner) for h in holders))
        for depth in range(1, len(names)):
            if names[depth].startswith("__") or not (isinstance(owner, nn.Module) or _is_config(owner)):
                break
            value = _attribute(owner, names[depth])
            if value is _MISSING:
                break
            if id(owner) in owned and _is_setting(owner, names[depth], value):
                uses = True
                if not _in_summary(owner, names[depth], value):
                    shown.setdefault(".".join(names[: depth + 1]), value)
            owner = value
    if not uses:
        return []
    lines = [f"  Library frame using your settings: {_short(summary.filename)}:{summary.lineno} in {summary.name}"]
    lines.append(f"    {_clip(statement)}")
    lines += [f"      {name} = {_library_value(value)}" for name, value in list(shown.items())[:_MAX_VALUES]]
    if len(shown) > _MAX_VALUES:
        lines.append(f"      ... ({len(shown) - _MAX_VALUES} more)")
    return lines


def _says_nothing(value: Any, default: Any) -> bool:
    """None, an empty container (``**kwargs``), an argument left at its default (``need_weights=True``), or a
    module without settings to show (``<BertForSequenceClassification module>``: the settings it reads follow)."""
    if value is None or (isinstance(value, (dict, list, tuple, set)) and not value):
        return True
    if isinstance(value, nn.Module):
        return not (_module_settings(value) or _extra_repr(value))
    return _equal(value, default)


def _defaults(frame: types.FrameType) -> dict[str, Any]:
    """The default values of the parameters of the frame's function (a method of ``self``, or a global function)."""
    code = frame.f_code
    owner = frame.f_locals.get("self")
    for function in (
        getattr(type(owner), code.co_name, None) if owner is not None else None,
        frame.f_globals.get(code.co_name),
    ):
        try:
            function = inspect.unwrap(function) if callable(function) else None
            if getattr(function, "__code__", None) is code:
                parameters = inspect.signature(function).parameters.values()
                return {p.name: p.default for p in parameters if p.default is not inspect.Parameter.empty}
        except (TypeError, ValueError):
            pass
    return {}


def _equal(a: Any, b: Any) -> bool:
    return _is_plain(a) and type(a) is type(b) and a == b


def _is_setting(owner: Any, name: str, value: Any) -> bool:
    if isinstance(owner, nn.Module):
        if name in _MODULE_STATE:
            return False
        if isinstance(value, torch.Tensor):  # a parameter or buffer: its shape is the module's setting
            return name in owner._parameters or name in owner._buffers
    return _is_plain(value)


def _attribute(owner: Any, name: str) -> Any:
    try:
        return getattr(owner, name)
    except Exception:  # a missing attribute, or a property that raises
        return _MISSING


def _in_summary(owner: Any, name: str, value: Any) -> bool:
    """Whether a module's setting read by a statement goes without a line of its own: its summary shows it
    (``<Embedding module num_embeddings=10, ...>``), or it is left at the module's default (``norm_type=2.0``)."""
    if not isinstance(owner, nn.Module):
        return False
    if isinstance(value, torch.Tensor):  # a parameter: its shape comes from the settings in the summary
        return bool(_module_settings(owner) or _extra_repr(owner))
    parameter = _init_parameters(type(owner)).get(name)
    at_default = parameter is not None and parameter.default is not inspect.Parameter.empty
    return name in _module_settings(owner) or (at_default and _same_setting(value, parameter.default))


@functools.lru_cache(maxsize=256)
def _init_parameters(cls: type) -> dict[str, inspect.Parameter]:
    """The named parameters of a module class's constructor (the first ``__init__`` in its MRO that has them)."""
    for klass in cls.__mro__:
        if klass in (nn.Module, object):
            break
        if "__init__" not in vars(klass):
            continue
        try:
            parameters = inspect.signature(vars(klass)["__init__"]).parameters
        except (TypeError, ValueError):
            return {}
        kinds = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
        named = {n: p for n, p in parameters.items() if n != "self" and p.kind in kinds}
        if named:
            return named
    return {}


def _module_settings(module: nn.Module) -> dict[str, Any]:
    """The constructor arguments a module keeps as attributes and that differ from their defaults (or have none)."""
    settings = {}
    for name, parameter in _init_parameters(type(module)).items():
        value = vars(module).get(name, _MISSING)
        if _is_plain(value) and (
            parameter.default is inspect.Parameter.empty or not _same_setting(value, parameter.default)
        ):
            settings[name] = value
    return settings


def _same_setting(value: Any, default: Any) -> bool:
    """``value == default``, also for a tuple that repeats an int default (``stride=(1, 1)`` for ``stride=1``)."""
    if _equal(value, default):
        return True
    return isinstance(value, tuple) and bool(value) and all(_equal(v, default) for v in value)


def _extra_repr(module: nn.Module) -> str:
    try:
        return " ".join(module.extra_repr().split())
    except Exception:
        return ""


def _library_value(value: Any) -> str:
    """Like ``_value``; a module shows its settings (``<Embedding module num_embeddings=10, embedding_dim=16>``)."""
    if not isinstance(value, nn.Module):
        return _value(value)
    settings = _module_settings(value)
    summary = ", ".join(f"{k}={v!r}" for k, v in settings.items()) if settings else _extra_repr(value)
    return f"<{type(value).__name__} module{' ' + _clip(summary, 120) if summary else ''}>"


def _statement(filename: str, tb: Any) -> str:
    """The failing statement, joined into one line when it spans several (a call with one argument per line).

    A ``raise`` inside an ``if`` comes with its condition (``if self.input_size != input.size(-1): raise ...``):
    the check is what names the setting.
    """
    first = last = tb.tb_lineno
    try:
        position = list(tb.tb_frame.f_code.co_positions())[tb.tb_lasti // 2]
        if position[0] == first and position[1] is not None:
            last = min(position[1], first + 30)
    except (AttributeError, IndexError, TypeError):
        pass
    parts = []
    for number in range(first, last + 1):
        line = linecache.getline(filename, number).strip()
        line = re.sub(r"\s+#[^'\"]*$", "", line)  # a trailing comment
        parts.append(line)
    text = " ".join(p for p in parts if p)
    text = re.sub(r"([(\[{]) | ?,? ([)\]}])", lambda m: m.group(1) or m.group(2), text)
    if text.startswith("raise ") and (condition := _raise_condition(tb.tb_frame.f_code, first)):
        text = f"if {condition}: {text}"
    return text


def _raise_condition(code: types.CodeType, lineno: int) -> str | None:
    """The condition of the ``if`` whose body raises at ``lineno``."""
    try:
        lines, start = inspect.getsourcelines(code)
        tree = ast.parse(textwrap.dedent("".join(lines)))
    except (OSError, TypeError, SyntaxError, ValueError):
        return None
    for node in ast.walk(tree):
        if isinstance(node, ast.If):
            for child in node.body:
                if isinstance(child, ast.Raise) and child.lineno + start - 1 <= lineno <= child.end_lineno + start - 1:
                    return ast.unparse(node.test)
    return None


def _chains_in(source: str) -> list[str]:
    """Names and attribute chains read in ``source`` (``self.config.num_labels``), in order, each once; no strings."""
    chains: list[str] = []
    current: list[str] = []
    after_dot = False  # the previous token is a "." (an attribute follows)
    try:
        for token in tokenize.generate_tokens(io.StringIO(source).readline):
            if token.type == tokenize.STRING and re.match(r"[rRbB]*[fF]", token.string):  # an f-string's fields
                for field in re.findall(r"(?<!\{)\{([^{}!:]+)", token.string):
                    chains += [c for c in _chains_in(field.strip()) if c not in chains]
            if token.type == tokenize.NAME and not keyword.iskeyword(token.string) and (after_dot == bool(current)):
                current.append(token.string)  # a chain's start, or its next attribute
            elif not (token.type == tokenize.OP and token.string == "." and current and not after_dot):
                if current and ".".join(current) not in chains:
                    chains.append(".".join(current))
                current = []
            after_dot = token.type == tokenize.OP and token.string == "."
    except (tokenize.TokenError, SyntaxError):  # a statement cut short: the chains read so far
        pass
    if current and ".".join(current) not in chains:
        chains.append(".".join(current))
    return chains


def _clip(text: str, width: int = _VALUE_WIDTH) -> str:
    return text if len(text) <= width else text[: width - 3] + "..."


def install_lovely_tensors() -> None:
    """``use_lovely_tensors``: every tensor repr (logs, shells, tracebacks) is a lovely-tensors summary."""
    import lovely_tensors

    lovely_tensors.set_config(color=sys.stdout.isatty())
    lovely_tensors.monkey_patch()
