"""The command line every tool in ``tools/`` shares: ``config.py [more.py ...] [++key value ...]`` then options.

Parsing must not import torch: ``--help`` and usage errors answer at once, before a tool imports
its heavy modules.
"""

from __future__ import annotations

import argparse
import os

from framework.base.quick_exit import collect_once_then_freeze

CONFIG_USAGE = "config.py [more.py ...] [++key value ...]"
_command: str | None = None  # how the tool was started, when not as ``python tools/NAME.py``


def started_as(command: str) -> None:
    """Name the tool ``command`` in its usage and errors (``framework-NAME``, ``python -m framework NAME``)."""
    global _command
    _command = command


class ToolParser(argparse.ArgumentParser):
    """An ``ArgumentParser`` for a tool: usage ``python tools/NAME config.py ... [options]``, its docstring as help.

    Started as a command (``framework-NAME``, ``python -m framework NAME``: ``framework.commands``),
    the usage names the command instead.

    With ``takes_config``, everything that is not an option (config files, ``++key value`` pairs)
    is collected into ``args.config_args``; an unknown ``--option`` is an error rather than being
    taken for a config file.
    """

    def __init__(self, tool_file: str, doc: str, *, takes_config: bool = True, usage_tail: str = "[options]"):
        collect_once_then_freeze()  # a tool's process starts here
        self.takes_config = takes_config
        prog = _command or f"python tools/{os.path.basename(tool_file)}"
        head = f"{prog} {CONFIG_USAGE} " if takes_config else f"{prog} "
        super().__init__(
            prog=prog,
            usage=head + usage_tail,
            description=doc,
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )

    def parse_tool_args(self, argv: list[str]) -> argparse.Namespace:
        """Parse ``argv``; exits 2 with the usage and a one-line reason when it is wrong."""
        if not self.takes_config:
            return self.parse_args(argv)
        args, rest = self.parse_known_args(argv)
        unknown = [a for i, a in enumerate(rest) if a.startswith("-") and not (i and rest[i - 1].startswith("++"))]
        if unknown:
            self.error(f"unknown option {unknown[0]} (see --help)")
        if not rest or rest[0].startswith("++"):
            self.error(f"a config file is required first: {CONFIG_USAGE}")
        args.config_args = rest
        return args
