"""One module object listed several times in a container (``debug_repeated_modules``, on by default).

``nn.ModuleList([Block(...)] * n)`` (or ``nn.Sequential(*[Block(...)] * n)``) repeats one object n times: every
layer of the stack is the same layer with one set of weights, so the model has a fraction of the capacity its
code describes, and nothing says so (the parameter count torch reports is that of one block).

Sharing weights on purpose is common (a recurrent cell, ALBERT's or the Universal Transformer's one layer
applied n times, tied embeddings), but it is written as one module called in a loop or as one module
registered under two names; a container that lists the same object at several of its own entries is what list
multiplication gives. At startup each ``nn.ModuleList`` and ``nn.Sequential`` is read (no step runs), and one
with the same module object at two or more entries is reported.
"""

from __future__ import annotations

from torch import nn

from framework.base.config import Config
from framework.base.findings import Finding, report
from framework.base.options import register
from framework.core.events import Event
from framework.core.plugin import Plugin, on
from framework.core.state import RunState

register(
    "debug_repeated_modules",
    "bool",
    True,
    "At startup: an nn.ModuleList or nn.Sequential that lists one module object at several entries ([Block()] * n "
    "repeats one block: its layers share one set of weights).",
    __name__,
)

CHECK = "sanity check"


def repeated_entries(container: nn.Module) -> dict[int, list[str]]:
    """``{id(module): [its entry names]}`` for each module object ``container`` lists at two or more entries."""
    entries: dict[int, list[str]] = {}
    for name, child in container._modules.items():  # with repeats: named_children() lists each object once
        if child is not None and any(True for _ in child.parameters()):
            entries.setdefault(id(child), []).append(name)
    return {key: names for key, names in entries.items() if len(names) > 1}


class RepeatedModules(Plugin):
    """Reports containers that list one module object at several entries."""

    bug_check = ("debug_repeated_modules",)

    @classmethod
    def from_config(cls, config: Config, state: RunState) -> RepeatedModules | None:
        return cls() if config.bool("debug_repeated_modules") else None

    @on(Event.STARTUP)
    def find(self, state: RunState) -> None:
        for path, container in state.model.named_modules():
            if not isinstance(container, (nn.ModuleList, nn.Sequential)):
                continue
            for names in repeated_entries(container).values():
                child = container._modules[names[0]]
                where = path or "the model"
                report(
                    Finding(
                        "warning",
                        CHECK,
                        f"{type(container).__name__} '{where}' lists the same {type(child).__name__} object at its "
                        f"entries {', '.join(names)}: those {len(names)} layers are one layer with one set of weights "
                        f"(as [{type(child).__name__}(...)] * {len(names)} builds it), so the stack has 1/{len(names)} "
                        f"of the parameters its code describes. Build a new module per entry "
                        f"([{type(child).__name__}(...) for _ in range({len(names)})]); if one shared layer is meant, "
                        f"call it in a loop instead.",
                        evidence={"entries": names, "class": type(child).__name__},
                        where={"module": where},
                        fix=f"[{type(child).__name__}(...) for _ in range({len(names)})]",
                        option="debug_repeated_modules = False",
                    ),
                )


PLUGINS = (RepeatedModules,)
