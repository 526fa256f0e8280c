"""The engine with the built-in features and plugins: what ``rnn.py`` and the tools run.

The core's engine (``framework.core.engine``) reaches training features and plugins only through
``framework.core.features.Features``; this entry-point module gives it the built-in ones.
"""

from __future__ import annotations

import importlib

from framework.config import Config
from framework.core import engine
from framework.core.events import Callbacks
from framework.core.plugin import Plugin
from framework.inspection.freezes import record_freezes
from framework.training.features import TrainingFeatures

# Ties within one Order are broken by this list: earlier modules' callbacks run first.
BUILTIN_PLUGIN_MODULES = (
    "framework.training.user_callbacks",
    "framework.training.amp",
    "framework.training.compile",
    "framework.training.optim",
    "framework.training.lr_control",
    "framework.training.lr_file",
    "framework.training.checkpoint_cleanup",
    "framework.training.early_stopping",
    "framework.training.unusual_values",
    "framework.debug.exception_context",
    "framework.debug.interrupt",
    "framework.training.periodic_checkpoints",
    "framework.training.preemption",
    "framework.debug.shell",
    "framework.debug.crash",
    "framework.debug.numerics",
    "framework.debug.amp_check",
    "framework.debug.layer_template",
    "framework.debug.layer_shapes",
    "framework.debug.first_step",
    "framework.debug.loss_inputs",
    "framework.debug.device_check",
    "framework.debug.padding_probe",
    "framework.debug.batch_independence",
    "framework.debug.eval_mode",
    "framework.debug.input_layout",
    "framework.debug.target_leakage",
    "framework.debug.split_overlap",
    "framework.debug.worker_randomness",
    "framework.debug.stale_gradients",
    "framework.debug.replicas",
    "framework.debug.update_integrity",
    "framework.debug.accumulation_check",
    "framework.debug.sanity",
    "framework.debug.grad_health",
    "framework.debug.diagnosis",
    "framework.debug.learning_watch",
    "framework.debug.verdicts",
    "framework.debug.fingerprints",
    "framework.debug.step_time",
    "framework.debug.memory",
    "framework.debug.profiling",
    "framework.debug.attention_maps",
    "framework.debug.tensorboard",
    "framework.debug.run_metrics",  # after tensorboard: its STARTUP passes the diagnostics' scalars on to it
    "framework.training.progress",
)


class BuiltinFeatures(TrainingFeatures):
    """The training features, the built-in plugins and the model-build watch of the sanity check."""

    @staticmethod
    def plugin_classes() -> list[type[Plugin]]:
        """The built-in plugin classes, in order."""
        classes = []
        for name in BUILTIN_PLUGIN_MODULES:
            classes += list(importlib.import_module(name).PLUGINS)
        return classes

    # parameters a library freezes by design are no finding of the sanity check
    watch_model_build = staticmethod(record_freezes)


class Engine(engine.Engine):
    """The engine of a run, with the built-in features and plugins."""

    def __init__(self, config: Config, callbacks: Callbacks | None = None):
        super().__init__(config, callbacks, BuiltinFeatures())
