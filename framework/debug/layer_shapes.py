"""``debug_print_layer_output_shape``: the actual output shapes of every module, each step."""

from __future__ import annotations

from typing import Any

from framework.base import log
from framework.base.config import Config
from framework.base.options import register
from framework.check_library.tensors import iter_tensors
from framework.core.events import Event, Order
from framework.core.plugin import Plugin, on
from framework.core.state import RunState

register(
    "debug_print_layer_output_shape",
    "bool",
    False,
    "Print every module's actual output shapes, one line per step.",
    __name__,
)


class LayerShapes(Plugin):
    """Logs one compact line per training step: ``path [16, 8] float32; ...`` in execution order."""

    after = ("NumericsGuard", "Compile")  # shapes of the model as compiled; a non-finite output stops first

    def __init__(self, model: Any) -> None:
        self.entries: list[str] = []
        self.active = False
        self.hooks = [
            module.register_forward_hook(self._hook(path or "(model)")) for path, module in model.named_modules()
        ]

    @classmethod
    def from_config(cls, config: Config, state: RunState) -> LayerShapes | None:
        return cls(state.model) if config.bool("debug_print_layer_output_shape") else None

    @on(Event.CLOSE)
    def remove_hooks(self, state: RunState) -> None:
        for hook in self.hooks:
            hook.remove()

    def _hook(self, path: str):
        def record(module: Any, args: tuple, output: Any) -> None:
            if self.active:
                shapes = ", ".join(
                    f"[{', '.join(map(str, t.shape))}] {str(t.dtype).removeprefix('torch.')}"
                    for t in iter_tensors(output)
                )
                self.entries.append(f"{path} {shapes}")

        return record

    @on(Event.STEP_START, Order.LAST)
    def on_step_start(self, state: RunState) -> None:
        self.entries = []
        self.active = True

    @on(Event.AFTER_FORWARD)
    def on_after_forward(self, state: RunState) -> None:
        self.active = False
        log.v4(f"ep {state.epoch} step {state.step_in_epoch} layer outputs: " + "; ".join(self.entries))


PLUGINS = (LayerShapes,)
