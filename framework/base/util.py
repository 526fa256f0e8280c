"""Small helpers shared by several components: building things from config specs, helper processes."""

from __future__ import annotations

import difflib
import importlib
import inspect
import os
import shlex
import subprocess
import sys
from collections.abc import Callable
from typing import Any

from framework.base.errors import ConfigError


def import_by_name(name: str, where: str) -> Any:
    """The object that ``"package.module.Attr"`` names."""
    module_name, _, attr = name.rpartition(".")
    if not module_name:
        raise ConfigError(f"{where}: {name!r} is not of the form 'module.Name'.")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise ConfigError(f"{where}: cannot import module {module_name!r} (for {name!r}): {exc}.") from None
    if not hasattr(module, attr):
        raise ConfigError(f"{where}: module {module_name!r} has no attribute {attr!r}.")
    return getattr(module, attr)


def accepted_kwargs(factory: Callable[..., Any]) -> set[str] | None:
    """Keyword names ``factory`` accepts, following ``**kwargs`` up a class hierarchy; None if open-ended."""
    if inspect.isclass(factory):
        signatures = [k.__dict__["__init__"] for k in factory.__mro__ if "__init__" in k.__dict__ and k is not object]
        skip_self = 1
    else:
        signatures, skip_self = [factory], 0
    names: set[str] = set()
    for function in signatures:
        try:
            params = list(inspect.signature(function).parameters.values())[skip_self:]
        except (TypeError, ValueError):
            return None
        names.update(p.name for p in params if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY))
        if not any(p.kind == p.VAR_KEYWORD for p in params):
            return names
    return None


def check_kwargs(factory: Callable[..., Any], kwargs: dict[str, Any], where: str) -> None:
    """Raise ConfigError naming the first keyword ``factory`` does not accept, with the closest one."""
    accepted = accepted_kwargs(factory)
    if accepted is None:
        return
    for key in kwargs:
        if key not in accepted:
            close = difflib.get_close_matches(key, sorted(accepted), n=1, cutoff=0.6)
            hint = f" Did you mean {close[0]!r}?" if close else ""
            name = getattr(factory, "__name__", repr(factory))
            raise ConfigError(
                f"{where}: {name} has no parameter {key!r}.{hint} It accepts: {', '.join(sorted(accepted))}."
            )


def start_framework_process(module: str, *args: str, **popen_kwargs: Any) -> subprocess.Popen:
    """Start ``python -m <module> ARGS`` with this framework importable (also when run from a checkout)."""
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [root, os.environ.get("PYTHONPATH")])))
    return subprocess.Popen([sys.executable, "-m", module, *args], env=env, **popen_kwargs)


def command_line() -> str:
    """The command that started this process, quoted for a shell: copy it to run the same again."""
    return " ".join(shlex.quote(a) for a in [sys.executable, *sys.argv])


def printable(text: str, limit: int = 300) -> str:
    """``text`` read from a file others can write, safe to print: control characters escaped (``\\x1b``), at most
    ``limit`` characters (``...`` marks a cut)."""
    escaped = "".join(c if c.isprintable() else c.encode("unicode_escape").decode("ascii") for c in text)
    return escaped if len(escaped) <= limit else escaped[: limit - 3] + "..."
