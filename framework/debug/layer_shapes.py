"""``debug_print_layer_output_shape``: the actual output shapes of every module, each step."""

from __future__ import annotations

from typing import Any

from framework import log
from framework.debug.tensors import iter_tensors
from framework.events import Event


class LayerShapes:
    """Logs one compact line per training step: ``path [16, 8] float32; ...`` in execution order."""

    def __init__(self) -> None:
        self.entries: list[str] = []
        self.active = False

    def install(self, engine: Any) -> None:
        """Hook every module of the model and log at the end of each step."""
        for path, module in engine.model.named_modules():
            module.register_forward_hook(self._hook(path or "(model)"))
        engine.callbacks.on(Event.STEP_START, self.on_step_start)
        engine.callbacks.on(Event.AFTER_FORWARD, self.on_after_forward)

    def _hook(self, path: str):
        def record(module: Any, args: tuple, output: Any) -> None:
            if self.active:
                shapes = ", ".join(
                    f"[{', '.join(map(str, t.shape))}] {str(t.dtype).removeprefix('torch.')}"
                    for t in iter_tensors(output)
                )
                self.entries.append(f"{path} {shapes}")

        return record

    def on_step_start(self, engine: Any) -> None:
        self.entries = []
        self.active = True

    def on_after_forward(self, engine: Any) -> None:
        self.active = False
        log.v4(f"ep {engine.epoch} step {engine.step_in_epoch} layer outputs: " + "; ".join(self.entries))
