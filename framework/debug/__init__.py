"""Diagnostics, one module each, bound to engine events when their option is on.

``install(engine)`` is the only entry point the engine calls; a diagnostic whose option is off
subscribes to nothing and costs nothing. ``framework.debug.debug_shell(...)`` opens a shell
anywhere. Imports are lazy so that ``import framework.debug`` does not load torch.
"""

from __future__ import annotations

from typing import Any

__all__ = ["debug_shell", "install"]


def install(engine: Any) -> None:
    """Subscribe every enabled diagnostic to the engine's events (after model and optimizer exist)."""
    from framework.debug.crash import StallWatch
    from framework.debug.exception_context import add_exception_context
    from framework.debug.interrupt import GracefulStop
    from framework.debug.numerics import NumericsGuard
    from framework.debug.shell import ShellInRunner
    from framework.events import Event

    config = engine.config
    engine.callbacks.on(Event.EXCEPTION, add_exception_context)
    GracefulStop().install(engine)
    ShellInRunner(config.get("debug_shell_in_runner")).install(engine)
    if config.get("watch_stall"):
        StallWatch(config.float("watch_stall")).install(engine)
    guard = NumericsGuard(engine)
    if guard.wanted:
        guard.install(engine)
    if config.bool("debug_print_layer_output_template"):
        from framework.debug.layer_template import print_layer_output_template

        engine.callbacks.on(Event.STARTUP, print_layer_output_template)
    if config.bool("debug_print_layer_output_shape"):
        from framework.debug.layer_shapes import LayerShapes

        LayerShapes().install(engine)


def __getattr__(name: str) -> Any:
    if name == "debug_shell":
        from framework.debug.shell import debug_shell

        return debug_shell
    raise AttributeError(f"module 'framework.debug' has no attribute {name!r}")
