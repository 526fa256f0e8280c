"""Diagnostics, one module each, bound to engine events when their option is on.

``install(engine)`` is the only entry point the engine calls; a diagnostic whose option is off
subscribes to nothing and costs nothing. ``framework.debug.debug_shell(...)`` opens a shell
anywhere. Imports are lazy so that ``import framework.debug`` does not load torch.
"""

from __future__ import annotations

from typing import Any

__all__ = ["debug_shell", "install", "prepare_run"]


def prepare_run(config: Any) -> None:
    """Adjust the config of a verdict run (debug_overfit_batches, debug_synthetic_data) before training starts."""
    from framework.debug.verdicts import prepare_run as prepare_verdict_run

    prepare_verdict_run(config)


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
    _install_health_checks(engine)
    _install_resource_monitors(engine)


def _install_health_checks(engine: Any) -> None:
    """Why doesn't it learn: sanity check, gradient health, learning curve, verdict runs, fingerprints."""
    from framework.debug.learning_watch import DevDivergenceWatch, LossWindowWatch

    config = engine.config
    if config.get("debug_sanity_check"):
        from framework.debug.sanity import SanityCheck

        SanityCheck(config).install(engine)
    grad_health = config.get("debug_grad_health")
    if grad_health:
        from framework.debug.grad_health import GradHealth

        GradHealth(10 if grad_health is True else grad_health, list(config.get("frozen_params") or [])).install(engine)
    if config.int("debug_loss_window") > 0:
        LossWindowWatch(config.int("debug_loss_window")).install(engine)
    if config.int("debug_dev_divergence_epochs") > 0:
        DevDivergenceWatch(config.int("debug_dev_divergence_epochs")).install(engine)
    if config.get("debug_overfit_batches"):
        from framework.debug.verdicts import OverfitVerdict

        OverfitVerdict(config).install(engine)
    if config.bool("debug_synthetic_data"):
        from framework.debug.verdicts import SyntheticDataVerdict

        SyntheticDataVerdict(config).install(engine)
    if config.get("debug_fingerprint_file"):
        from framework.debug.fingerprints import Fingerprints

        Fingerprints(config.get("debug_fingerprint_file"), config.int("debug_fingerprint_steps")).install(engine)


def _install_resource_monitors(engine: Any) -> None:
    """Time, memory, profiling and TensorBoard (issue: see where the resources go)."""
    import os

    from framework import log
    from framework.debug.memory import LeakDetector, MemoryLog, MemoryWatcherProcess
    from framework.debug.step_time import StepTimer

    config = engine.config
    StepTimer(per_step=log.enabled(5)).install(engine)
    if config.bool("torch_log_memory_usage"):
        MemoryLog().install(engine)
    if config.bool("debug_leak_check"):
        LeakDetector(config.int("debug_leak_check_interval")).install(engine)
    if config.bool("watch_memory"):
        MemoryWatcherProcess(config.get("log")).install(engine)
    tensorboard_dir = config.get("tensorboard_dir") or config.get("tf_log_dir")
    if config.get("torch_profile"):
        from framework.debug.profiling import TorchProfile

        model_dir = os.path.dirname(config.get("model") or "") or "."
        out_dir = config.get("torch_profile_dir") or os.path.join(model_dir, "profile")
        TorchProfile(config.get("torch_profile"), out_dir, tensorboard_dir).install(engine)
    if config.get("cprofile"):
        from framework.debug.profiling import CProfile

        CProfile(config.get("cprofile")).install(engine)
    if tensorboard_dir and (engine.distributed is None or engine.distributed.rank == 0):
        from framework.debug.tensorboard import TensorBoardLogger

        summaries = config.get("debug_grad_summaries")
        interval = 100 if summaries is True else (summaries or None)
        TensorBoardLogger(tensorboard_dir, config.int("tensorboard_log_interval"), interval).install(engine)


def __getattr__(name: str) -> Any:
    if name == "debug_shell":
        from framework.debug.shell import debug_shell

        return debug_shell
    raise AttributeError(f"module 'framework.debug' has no attribute {name!r}")
