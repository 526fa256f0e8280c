"""Diagnostics, one plugin module each (``framework.core.plugin``) that lists its ``PLUGINS``: found by what it
declares (``framework.base.declarations``), with no central list.

``framework.debug.debug_shell(...)`` opens a shell anywhere. Imports are lazy so that
``import framework.debug`` does not load torch.
"""

from __future__ import annotations

from typing import Any

__all__ = ["debug_shell"]


def __getattr__(name: str) -> Any:
    if name == "debug_shell":
        from framework.debug.shell import debug_shell

        return debug_shell
    raise AttributeError(f"module 'framework.debug' has no attribute {name!r}")
