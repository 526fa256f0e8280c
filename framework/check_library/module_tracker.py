"""Which module of the model is running: a stack of module paths kept by global module hooks.

Used while replaying a failing step or dry-running the model, where per-module cost does not
matter; the fast paths use hooks only on the modules they check.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Callable
from typing import Any

from torch import nn

PostHook = Callable[[str, nn.Module, tuple, Any], None]


class ModuleTracker:
    """Context manager: ``stack`` holds the paths of the model's modules currently in forward."""

    def __init__(self, model: nn.Module, post_hook: PostHook | None = None):
        self.names = {id(m): name or "(model)" for name, m in model.named_modules()}
        self.stack: list[str] = []
        self.post_hook = post_hook
        self._handles: list[Any] = []

    @property
    def current(self) -> str | None:
        """The innermost running module's path."""
        return self.stack[-1] if self.stack else None

    def _pre(self, module: nn.Module, args: tuple) -> None:
        name = self.names.get(id(module))
        if name is not None:
            self.stack.append(name)

    def _post(self, module: nn.Module, args: tuple, output: Any) -> None:
        name = self.names.get(id(module))
        if name is None:
            return
        if self.stack and self.stack[-1] == name:
            self.stack.pop()
        if self.post_hook is not None:
            self.post_hook(name, module, args, output)

    def __enter__(self) -> ModuleTracker:
        self._handles = [
            nn.modules.module.register_module_forward_pre_hook(self._pre),
            nn.modules.module.register_module_forward_hook(self._post, always_call=True),
        ]
        return self

    def __exit__(self, *exc: Any) -> None:
        for handle in self._handles:
            handle.remove()
        self._handles = []
        self.stack.clear()


def matches_any(path: str | None, patterns: list[str]) -> bool:
    """Whether a module path matches one of the fnmatch patterns (``decoder.*.attn``)."""
    return path is not None and any(fnmatch.fnmatchcase(path, p) for p in patterns)


def skipped_by(stack: list[str], patterns: list[str]) -> bool:
    """Whether any module on the stack (the op's module or an enclosing one) matches a pattern."""
    return bool(patterns) and any(matches_any(path, patterns) for path in stack)
