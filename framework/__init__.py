"""A RETURNN-style, config-driven PyTorch training framework built for debugging.

``import framework`` stays light (no torch): config validation and ``--help-options`` are
instant. ``framework.get_run_ctx`` and the engine load torch when first used.
"""

from typing import Any

__version__ = "0.1.0"

__all__ = ["Config", "get_global_config", "get_run_ctx", "run_output_dir", "__version__"]

from framework.base.config import Config, get_global_config, run_output_dir  # noqa: E402


def __getattr__(name: str) -> Any:
    if name == "get_run_ctx":
        from framework.core.run_ctx import get_run_ctx

        return get_run_ctx
    raise AttributeError(f"module 'framework' has no attribute {name!r}")
