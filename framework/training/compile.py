"""``torch_compile``: train with ``torch.compile``d model calls.

``torch_compile = True`` (or a dict of ``torch.compile`` options, e.g. ``{"mode": "max-autotune"}``
or ``{"backend": "aot_eager"}``) compiles what ``train_step`` gets as ``model``. The first step
runs eager: the first-step checks (sanity, layer shapes, loss inputs) hook into modules, and
hooks added to a compiled module would not be seen. Diagnostics that hook every step
(``debug_add_check_numerics_on_output``, ``debug_add_check_numerics_ops``) keep the whole run
eager, and say so at startup. Evaluation and every replay run the eager model. Checkpoints hold
the eager model's parameters, so compiled and eager runs resume from each other's checkpoints.
Gradients the compiled model gets wrong are told apart from the model's own where gradient health or
update integrity warns (``framework.check_library.compiled_gradients``: an eager step on a copy).
"""

from __future__ import annotations

import inspect
from typing import Any

import torch

from framework.base import log
from framework.base.config import Config
from framework.base.errors import ConfigError
from framework.base.options import register
from framework.core.events import Event, Order
from framework.core.measurements import EAGER_ONLY
from framework.core.plugin import Plugin, on
from framework.core.state import RunState

register(
    "torch_compile",
    "bool | dict",
    False,
    "Compile the model for training with torch.compile: True, or a dict of torch.compile options "
    "(e.g. {'mode': 'max-autotune'}).",
    __name__,
)


class Compile(Plugin):
    """Swaps ``state.step_model`` for its compiled version after the first training step."""

    order = Order.FIRST
    needs = (EAGER_ONLY,)

    def __init__(self, options: dict[str, Any]):
        self.options = options
        self.steps_started = 0
        self.compiled: torch.nn.Module | None = None

    @on(Event.STARTUP)
    def wrap(self, state: RunState) -> None:
        """Wrap now (torch.compile's imports take a second); the compiling happens in the second step's forward."""
        eager_only = state.store.get(EAGER_ONLY)
        if eager_only is not None:
            log.v3(f"torch_compile: the run stays eager because {eager_only}, which a compiled model would not run.")
            self.callbacks.off(Event.STEP_START, self.compile_after_first_step)
            return
        log.v4("torch_compile: the first step runs eager (first-step checks hook into modules), then compiled.")
        self.compiled = torch.compile(state.step_model, **self.options)

    @classmethod
    def from_config(cls, config: Config, state: RunState) -> Compile | None:
        spec = config.get("torch_compile")
        if not spec:
            return None
        options = {} if spec is True else dict(spec)
        try:
            inspect.signature(torch.compile).bind(state.model, **options)
        except TypeError as exc:
            raise ConfigError(f"torch_compile = {spec!r}: not torch.compile's options ({exc}).") from None
        return cls(options)

    @on(Event.STEP_START)
    def compile_after_first_step(self, state: RunState) -> None:
        self.steps_started += 1
        if self.steps_started == 2:
            state.control.use_step_model(self.compiled)
            self.callbacks.off(Event.STEP_START, self.compile_after_first_step)


PLUGINS = (Compile,)
