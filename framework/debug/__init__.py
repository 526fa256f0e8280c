"""Diagnostics, one module each, bound to engine events when their option is on.

``install(engine)`` is the only entry point the engine calls; a diagnostic whose option is off
subscribes to nothing and costs nothing.
"""

from __future__ import annotations

from typing import Any

from framework.debug.exception_context import add_exception_context
from framework.events import Event


def install(engine: Any) -> None:
    """Subscribe every enabled diagnostic to the engine's events (after model and optimizer exist)."""
    from framework.debug.numerics import NumericsGuard

    config = engine.config
    engine.callbacks.on(Event.EXCEPTION, add_exception_context)
    guard = NumericsGuard(engine)
    if guard.wanted:
        guard.install(engine)
    if config.bool("debug_print_layer_output_template"):
        from framework.debug.layer_template import print_layer_output_template

        engine.callbacks.on(Event.STARTUP, print_layer_output_template)
    if config.bool("debug_print_layer_output_shape"):
        from framework.debug.layer_shapes import LayerShapes

        LayerShapes().install(engine)
