"""The sanity check before training (``debug_sanity_check``, on by default).

At startup, on the first batches of every dataset: dtypes, labels within ``sparse_dim``, NaN/Inf,
value ranges, constant features, train/dev class balance (``data_checks``). On the first
training step, before its update: losses that cannot be trained, parameters frozen by mistake,
without gradient, and ``debug_output_ranges`` (``model_checks``). The step is the real first
step, so the check costs one step's hooks and no extra compute.

A gradient that is exactly zero at step 0 is often the initialisation's design: a zero-initialised
norm weight, gate or residual branch (timm's ``zero_init_last``, torchvision's
``zero_init_residual``, ReZero, zero convolutions) blocks the gradient of what comes before it
until its own first update. Those parameters are watched over the next ``SETTLE_UPDATES``
updates (their gradient norms summed on the device, one host sync at the end) and named only if
their gradient stayed exactly zero: dead units, a ReLU that never fires. Likewise a parameter
that gets no gradient at step 0 while others do may be skipped by that step only (LayerDrop,
stochastic depth, an idle expert of a top-1 mixture of experts): it is named as not connected to
the loss only if it got no gradient in any of those updates either (a Python check per update).

Findings are printed as warnings; severe ones stop training with all of them in the message,
except in the verdict runs (``debug_overfit_batches``, ``debug_synthetic_data``), whose verdict
is the point and which list the findings after it.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import torch

from framework.base import findings as findings_reporter
from framework.base import log
from framework.base.config import Config
from framework.base.errors import DataError, FrameworkError, ModelCheckError
from framework.base.findings import Finding
from framework.base.options import register
from framework.check_library import data_checks, dataset_length, model_checks, sharded
from framework.check_library.loss_invariance import invariance_note, invariant_parameters
from framework.check_library.model_checks import SETTLE_UPDATES
from framework.check_library.module_tracker import matches_any
from framework.core.events import Event, Order
from framework.core.measurements import FROZEN_USED, INPUT_SCALES, SPLITS_ON_TRIAL, VERDICT_RUN
from framework.core.plugin import Plugin, on
from framework.core.state import RunState

register(
    "debug_sanity_check",
    "bool | int",
    True,
    "Check the data (first N batches) and the first step (losses, gradients, output ranges) before training.",
    __name__,
    range="[0, inf)",
    true_means=4,
)

register(
    "debug_output_ranges",
    "dict",
    {},
    "{module path pattern: (low, high)}: the sanity check and framework.testing verify these outputs; '(model)' = root.",
    __name__,
)


class SanityCheck(Plugin):
    """Data checks at STARTUP, model checks around the first step."""

    order = Order.CHECK
    needs = (VERDICT_RUN, SPLITS_ON_TRIAL, INPUT_SCALES, FROZEN_USED)

    def __init__(self, config: Config):
        self.num_batches = config.int_or_off("debug_sanity_check")
        self.frozen = list(config.get("frozen_params") or [])
        self.ranges = dict(config.get("debug_output_ranges") or {})
        self.strict = True  # findings stop the run, except in a verdict run (VERDICT_RUN), whose verdict decides
        self._capture: Any = None
        self._captured: dict[str, list] = {}
        self._zero: list[str] = []  # exactly-zero gradient at step 0: judged again over the next updates
        self._zero_sums: torch.Tensor | None = None  # their gradient norms summed since (on the device)
        self._zero_updates = 0
        self._unused: list[str] = []  # no gradient at step 0 while others got one: judged over the same updates
        self._frozen_calls: dict[str, list[bool]] = {}  # module with frozen parameters -> per call: could it train
        self._first_call: dict[str, int] = {}  # module with frozen parameters -> when it first finished (a count)
        self._last_trainable_call = -1  # when a module with trainable parameters last finished, in the first step
        self._frozen_hooks: list[Any] = []
        self._scales: list[Finding] = []  # the data's range warnings, judged by what the first learned layer gets

    @classmethod
    def from_config(cls, config: Config, state: RunState) -> SanityCheck | None:
        return cls(config) if config.int_or_off("debug_sanity_check") else None

    @on(Event.STARTUP)
    def check_data(self, state: RunState) -> None:
        self.strict = state.store.get(VERDICT_RUN) is None
        findings, counts, stats, samples = [], {}, {}, {}
        for option, loader in state.loaders.items():
            if (length := dataset_length.length_finding(option, loader.dataset)) is not None:
                findings.append(length)
            batches = samples[option] = data_checks.sample_batches(loader, self.num_batches)
            for key in state.extern_data.values():
                found = data_checks.key_findings(option, loader.dataset.name, key, batches)
                findings += [
                    f for f in found if f.severity != "note" or option == "train"
                ]  # a note once, not per split
                if key.sparse_dim is not None and batches:
                    counts.setdefault(key.name, {})[option] = data_checks.class_counts(loader.dataset, key, batches)
                if batches and (key_stats := data_checks.value_stats(key, batches)) is not None:
                    stats.setdefault(key.name, {})[option] = key_stats
        per_frame = {key: data_checks.labels_per_frame(state.extern_data[key]) for key in counts}
        shifts = {  # whether the splits hold the key's classes otherwise (missing, or in other proportions)
            key: any(f.where.get("dataset") != "train" for f in data_checks.balance_findings(key, per_option))
            for key, per_option in counts.items()
            if not per_frame[key]
        }
        along = data_checks.split_keys(shifts)
        for key, per_option in counts.items():
            findings += data_checks.balance_findings(key, per_option, per_frame[key], split_along=key in along)
            if "train" in per_option:
                findings += data_checks.order_findings(state.extern_data[key], samples["train"], per_option["train"][0])
        for key, per_option in stats.items():
            findings += data_checks.split_findings(key, per_option)
        findings = [self._on_trial(state, f) for f in findings]
        if state.store.producer(INPUT_SCALES) is not None:  # the first step's run decides whether the scale reaches
            self._scales = [f for f in findings if f.evidence.get("scale") and f.severity == "warning"]
            findings = [f for f in findings if not any(f is d for d in self._scales)]
        self._report(state, "data", findings, DataError)

    def _judge_scales(self, state: RunState) -> None:
        """Report the data's range warnings held for the first step: a note for a key whose raw scale reached no
        nonlinearity (the step scaled it, or a normalisation removed it: INPUT_SCALES), else as they were."""
        held, self._scales = self._scales, []
        verdicts = state.store.get(INPUT_SCALES) or {}
        judged = []
        for finding in held:
            raw, what = verdicts.get(finding.where.get("key"), (True, ""))
            if not raw:
                finding = dataclasses.replace(finding, severity="note", message=f"{finding.message} But {what}.")
            judged.append(finding)
        if judged:
            self._report(state, "data", judged, DataError)

    @staticmethod
    def _on_trial(state: RunState, finding: Finding) -> Finding:
        """A warning about a split's input key whose difference from train the split comparison decides once the
        model has learned (it undoes the difference and scores both): a note, since the experiment decides."""
        where = (finding.where.get("dataset"), finding.where.get("key"))
        if finding.severity != "warning" or where not in (state.store.get(SPLITS_ON_TRIAL) or set()):
            return finding
        text = " The split comparison decides whether this difference hurts, once the model has learned."
        return dataclasses.replace(finding, severity="note", message=finding.message + text)

    @on(
        Event.STEP_START, Order.LAST, once=True
    )  # after diagnostics that run the model at STEP_START (TensorBoard's graph)
    def before_first_step(self, state: RunState) -> None:
        self._judge_scales(state)
        if self.ranges:
            self._capture = model_checks.capture_outputs(state.model, list(self.ranges))
            self._captured = self._capture.__enter__()
        self._watch_frozen_modules(state.model)

    def _watch_frozen_modules(self, model: torch.nn.Module) -> None:
        """Note, for the modules holding frozen parameters that frozen_params does not list, whether each of their
        calls in the first step ran with gradients and in training mode (a teacher runs under no_grad), and whether
        a module with trainable parameters ran after them (a frozen backbone or adapter base feeds trained layers)."""

        def watched(path: str, own: list[tuple[str, torch.nn.Parameter]]) -> bool:
            names = [f"{path}.{n}" if path else n for n, _ in own]
            return any(not p.requires_grad for _, p in own) and not all(matches_any(n, self.frozen) for n in names)

        modules = [
            (path, module, list(module.named_parameters(recurse=False))) for path, module in model.named_modules()
        ]
        if not any(watched(path, own) for path, _, own in modules):
            return
        finished = [0]  # forward calls finished so far, of the hooked modules

        def trained(module: torch.nn.Module, args: Any, out: Any) -> None:
            finished[0] += 1
            self._last_trainable_call = finished[0]

        for path, module, own in modules:
            if any(p.requires_grad for _, p in own):
                # when it finishes: an adapter whose own parameters act after its frozen base finishes after it
                self._frozen_hooks.append(module.register_forward_hook(trained))
            if not watched(path, own):
                continue
            calls = self._frozen_calls.setdefault(path, [])

            def note(module: torch.nn.Module, args: Any, calls: list[bool] = calls) -> None:
                calls.append(torch.is_grad_enabled() and module.training)

            def done(module: torch.nn.Module, args: Any, out: Any, path: str = path) -> None:
                finished[0] += 1
                self._first_call.setdefault(path, finished[0])

            self._frozen_hooks.append(module.register_forward_pre_hook(note))
            self._frozen_hooks.append(module.register_forward_hook(done))

    @on(Event.AFTER_FORWARD, once=True)
    def after_first_forward(self, state: RunState) -> None:
        self.release(state)
        findings = model_checks.range_findings(state.model, self.ranges, self._captured) if self.ranges else []
        self._captured = {}
        self._report(state, "first step", findings, ModelCheckError)
        # A loss without grad_fn would fail in backward with torch's message: stop with ours, in any run.
        self._report(
            state, "first step", model_checks.loss_findings(state.run_ctx.losses), ModelCheckError, strict=True
        )

    @on(Event.AFTER_BACKWARD, once=True)
    def after_first_backward(self, state: RunState) -> None:
        # Per module with frozen parameters: fixed by design when every call ran without gradient or in eval mode, or
        # before a module with trainable parameters. Idle when the step never ran it: freezing it changes nothing in
        # training (no gradient either way), so it cannot be frozen by mistake (EMA weights kept beside the model),
        # unless the step used its parameters without calling it (F.normalize(self.fc.weight)): the first step's run
        # says whose values entered the gradient (FROZEN_USED; without that run, the hooks alone decide).
        used = state.store.get(FROZEN_USED) or frozenset()
        fixed, idle = set(), set()
        for path, calls in self._frozen_calls.items():
            last = self._last_trainable_call
            by_design = bool(calls) and (not any(calls) or self._first_call.get(path, last) < last)
            for n, p in state.model.get_submodule(path).named_parameters(recurse=False):
                if by_design:
                    fixed.add(f"{path}.{n}" if path else n)
                elif not calls and id(p) not in used:
                    idle.add(f"{path}.{n}" if path else n)
        findings = model_checks.gradient_findings(
            state.model,
            self.frozen,
            state.optimizer,
            zero_gradients=False,
            unused=False,
            fixed=frozenset(fixed),
            idle=frozenset(idle),
        )
        trainable = [(n, p) for n, p in state.model.named_parameters() if p.requires_grad]
        if any(p.grad is not None for _, p in trainable):
            self._unused = [n for n, p in trainable if p.grad is None and not matches_any(n, self.frozen)]
        self._zero = model_checks.zero_gradient_names(state.model, self.frozen)
        if self._zero:
            blocking = [n for n in model_checks.zero_valued_names(state.model) if n not in self._zero]
            because = (
                f"; exactly zero at initialisation: {model_checks.by_module(state.model, blocking, limit=3)} (a "
                f"zero-initialised norm weight, gate or residual branch blocks the gradient until its first update)"
                if blocking
                else ""
            )
            findings.append(
                Finding(
                    "note",
                    "sanity check",
                    f"{model_checks.by_module(state.model, self._zero)} get a gradient that is exactly zero at step 0"
                    f"{because}. Judged again over the next {SETTLE_UPDATES} updates: named if it stays zero.",
                    evidence={"zero_gradients": len(self._zero), "zero_valued": blocking},
                    where=model_checks.named(self._zero),
                )
            )
        self._report(state, "first step", findings, ModelCheckError)
        notes = sum(f.severity == "note" for f in state.control.findings)
        log.v4(f"Sanity check done: {len(state.control.findings) - notes} finding(s), {notes} note(s) (verbosity 5).")

    @on(Event.BEFORE_OPTIMIZER_STEP)
    def watch_zero_gradients(self, state: RunState) -> None:
        """Sum the gradient norms of the parameters whose gradient was exactly zero at step 0; judge at the end."""
        if not self._zero and not self._unused:  # none, or judged: no cost on later steps
            self.callbacks.off(Event.BEFORE_OPTIMIZER_STEP, self.watch_zero_gradients)
            return
        self._zero_updates += 1
        if self._zero_updates == 1 or state.control.update_skipped:  # step 0's gradient was judged already
            return
        params = dict(state.model.named_parameters())
        self._unused = [n for n in self._unused if params[n].grad is None]
        if not self._zero:
            if self._zero_updates > SETTLE_UPDATES:
                self.judge_zero_gradients(state)
            return
        present = [(i, params[n].grad) for i, n in enumerate(self._zero) if params[n].grad is not None]
        if self._zero_sums is None:
            self._zero_sums = torch.zeros(len(self._zero), device=next(iter(params.values())).device)
        if present:
            norms = sharded.norms([g for _, g in present])  # of the whole gradients, also under FSDP
            index = torch.tensor([i for i, _ in present], device=norms.device)
            self._zero_sums.index_add_(0, index, norms.to(self._zero_sums.device))
        if self._zero_updates > SETTLE_UPDATES:
            self.judge_zero_gradients(state)

    @on(Event.FINISH)
    def judge_zero_gradients(self, state: RunState) -> None:
        """Name the parameters whose gradient stayed exactly zero (or absent) after step 0 (once; a run too short
        says nothing)."""
        unused, self._unused = self._unused, []
        if unused and self._zero_updates > SETTLE_UPDATES:
            finding = model_checks.unused_finding(
                state.model, unused, updates=self._zero_updates - 1, optimizer=state.optimizer
            )
            report_findings(state, f"first {self._zero_updates} updates", [finding], ModelCheckError, strict=False)
        if not self._zero or self._zero_sums is None:
            return
        names, sums, updates = self._zero, self._zero_sums.tolist(), self._zero_updates - 1
        self._zero, self._zero_sums = [], None
        still = [n for n, total in zip(names, sums, strict=True) if total == 0]
        redundant = invariant_parameters(state, still)  # zero by the loss's construction (a critic's output bias)
        still = [n for n in still if n not in redundant]
        findings = [model_checks.zero_gradient_finding(state.model, still, updates=updates)] if still else []
        if redundant:
            findings.append(invariance_note(state.model, redundant, updates))
        if findings:
            report_findings(state, f"first {updates + 1} updates", findings, ModelCheckError, strict=False)

    @on(Event.EXCEPTION)
    @on(Event.CLOSE)
    def release(self, state: RunState) -> None:
        self._judge_scales(state)  # a run that ends before its first step still gets the data's warnings
        for handle in self._frozen_hooks:
            handle.remove()
        self._frozen_hooks = []
        if self._capture is not None:
            self._capture.__exit__(None, None, None)
            self._capture = None

    def _report(
        self,
        state: RunState,
        stage: str,
        findings: list[Finding],
        error: type[FrameworkError],
        strict: bool | None = None,
    ) -> None:
        report_findings(state, stage, findings, error, self.strict if strict is None else strict)


def report_findings(
    state: RunState,
    stage: str,
    findings: list[Finding],
    error: type[FrameworkError],
    strict: bool,
    off: str = "debug_sanity_check = False",
) -> None:
    """Report ``findings`` as the sanity check's (check ``sanity check (<stage>)``, the option ``off``) and raise
    ``error`` for severe ones when ``strict``.

    Every default-on check before or at the first step reports through here, so that its findings
    look alike and count in the sanity check's summary. Notes are logged at verbosity 5; a severe finding
    that stops the run is logged by the error that says so.
    """
    reported = [dataclasses.replace(f, check=f"sanity check ({stage})", option=f.option or off) for f in findings]
    severe = [f for f in reported if f.severe]
    for finding in reported:
        quiet = finding.severity == "note" or (finding.severe and strict)
        findings_reporter.report(finding, verbosity=5 if quiet else None)
    if severe and strict:
        raise error(
            f"Sanity check ({stage}) failed: " + " ".join(f.message for f in severe) + f" ({off} skips this check.)"
        )


PLUGINS = (SanityCheck,)
