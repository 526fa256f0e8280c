"""The sanity check before training (``debug_sanity_check``, on by default).

At startup, on the first batches of every dataset: dtypes, labels within ``sparse_dim``, NaN/Inf,
value ranges, constant features, train/dev class balance (``data_checks``). On the first
training step, before its update: losses that cannot be trained, parameters frozen by mistake,
without gradient or with an all-zero gradient, and ``debug_output_ranges`` (``model_checks``).
The step is the real first step, so the check costs one step's hooks and no extra compute.

Findings are printed as warnings; severe ones stop training with all of them in the message,
except in the verdict runs (``debug_overfit_batches``, ``debug_synthetic_data``), whose verdict
is the point and which list the findings as likely causes.
"""

from __future__ import annotations

from typing import Any

from framework import log
from framework.debug import data_checks, model_checks
from framework.debug.data_checks import Finding
from framework.errors import DataError, FrameworkError
from framework.events import Event

DEFAULT_BATCHES = 4


class ModelCheckError(FrameworkError):
    """The first training step shows that the model cannot be trained as it is."""


class SanityCheck:
    """Data checks at STARTUP, model checks around the first step."""

    def __init__(self, config: Any):
        setting = config.get("debug_sanity_check")
        self.num_batches = DEFAULT_BATCHES if setting is True else int(setting)
        self.frozen = list(config.get("frozen_params") or [])
        self.ranges = dict(config.get("debug_output_ranges") or {})
        self.strict = not (config.get("debug_overfit_batches") or config.bool("debug_synthetic_data"))
        self._capture: Any = None
        self._captured: dict[str, list] = {}

    def install(self, engine: Any) -> None:
        """Subscribe to STARTUP and to the first step's events."""
        callbacks = engine.callbacks
        callbacks.on(Event.STARTUP, self.check_data)
        callbacks.on(Event.STEP_START, self.before_first_step)
        callbacks.on(Event.AFTER_FORWARD, self.after_first_forward)
        callbacks.on(Event.AFTER_BACKWARD, self.after_first_backward)
        callbacks.on(Event.EXCEPTION, self._release)

    def check_data(self, engine: Any) -> None:
        findings, counts, stats = [], {}, {}
        for option, loader in engine.loaders.items():
            batches = data_checks.sample_batches(loader, self.num_batches)
            for key in engine.extern_data.values():
                findings += data_checks.key_findings(option, loader.dataset.name, key, batches)
                if key.sparse_dim is not None and batches:
                    counts.setdefault(key.name, {})[option] = data_checks.class_counts(loader.dataset, key, batches)
                if batches and (key_stats := data_checks.value_stats(key, batches)) is not None:
                    stats.setdefault(key.name, {})[option] = key_stats
        for key, per_option in counts.items():
            findings += data_checks.balance_findings(key, per_option)
        for key, per_option in stats.items():
            findings += data_checks.split_findings(key, per_option)
        self._report(engine, "data", findings, DataError)

    def before_first_step(self, engine: Any) -> None:
        engine.callbacks.off(Event.STEP_START, self.before_first_step)
        if self.ranges:
            self._capture = model_checks.capture_outputs(engine.model, list(self.ranges))
            self._captured = self._capture.__enter__()

    def after_first_forward(self, engine: Any) -> None:
        engine.callbacks.off(Event.AFTER_FORWARD, self.after_first_forward)
        self._release(engine)
        findings = model_checks.range_findings(engine.model, self.ranges, self._captured) if self.ranges else []
        self._captured = {}
        self._report(engine, "first step", findings, ModelCheckError)
        # A loss without grad_fn would fail in backward with torch's message: stop with ours, in any run.
        self._report(
            engine, "first step", model_checks.loss_findings(engine.run_ctx.losses), ModelCheckError, strict=True
        )

    def after_first_backward(self, engine: Any) -> None:
        engine.callbacks.off(Event.AFTER_BACKWARD, self.after_first_backward)
        findings = model_checks.gradient_findings(engine.model, self.frozen, engine.optimizer)
        self._report(engine, "first step", findings, ModelCheckError)
        log.v4(f"Sanity check done: {len(engine.findings)} finding(s).")

    def _release(self, engine: Any) -> None:
        if self._capture is not None:
            self._capture.__exit__(None, None, None)
            self._capture = None

    def _report(
        self, engine: Any, stage: str, findings: list[Finding], error: type[FrameworkError], strict: bool | None = None
    ) -> None:
        strict = self.strict if strict is None else strict
        engine.findings += findings
        severe = [f for f in findings if f.severe]
        for finding in findings:
            if finding.level == "note":
                log.v4(f"Sanity check ({stage}) note: {finding.text}")
            elif not (finding.severe and strict):
                log.v2(f"WARNING sanity check ({stage}): {finding.text}")
        if severe and strict:
            raise error(
                f"Sanity check ({stage}) failed: "
                + " ".join(f.text for f in severe)
                + " (debug_sanity_check = False skips these checks.)"
            )
