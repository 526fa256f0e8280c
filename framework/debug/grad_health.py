"""Gradient health during training (``debug_grad_health``: every N updates, and at the first).

At a check, right before the optimizer step, each parameter's gradient norm is taken and about
4096 entries of it (drawn at random once) are copied; right after the step, the update ratio |dW| / |W|
of those entries. One host sync per check and no copy of the model. Warnings (once per
parameter and kind) name the layers whose gradients vanish or explode (an update larger than the
weight itself, or the global gradient norm jumping far above its earlier values). At the first
check after N updates (or at the end of the first epoch) the parameters are compared with their
startup values by float64 sum and norm: those that never changed although they require grad are
named. ``frozen_params`` are compared at every check and must not change. With TensorBoard, each
parameter's gradient norm and update ratio are logged under ``grad_health/``.

Judgments that depend on the initialisation wait for the learning dynamics: a zero-initialised norm
weight, gate or residual branch (timm's ``zero_init_last``, torchvision's ``zero_init_residual``,
ReZero, zero convolutions) makes the gradients before it zero at step 0, and small inits (BERT's
attention query/key weights, LayerScale) make them tiny, by design. So a weight is *vanishing*
only when its gradient RMS is below ``VANISHING`` of the largest weight's, its update is too small
to matter next to the other weights' (an adaptive optimizer such as Adam compensates a small
gradient: the layer learns), and both still hold ``SETTLE_UPDATES`` updates later without the
gradient having grown ``RECOVERING`` times (a gradient blocked by a weight that starts at zero grows
as that weight moves); a check that finds such suspects schedules the one that confirms them.
"Never changed" is judged after ``SETTLE_UPDATES`` updates at the earliest, and a weight that
starts at or near zero (``TINY_INIT``) is not called exploding while its norm grows from there.

In a compiled run (``torch_compile``), a warning about missing or vanishing gradients raised at a check
compares the named parameters' gradients in that compiled step with an eager step of the same batch on a
probe copy (``framework.check_library.compiled_gradients``): a compiler problem, or the model's own.
"""

from __future__ import annotations

import dataclasses
import math
import statistics
from collections.abc import Callable
from typing import Any

import torch

from framework.base import log
from framework.base.config import Config
from framework.base.findings import Finding, report
from framework.base.options import register
from framework.check_library import sharded
from framework.check_library.compiled_gradients import compare_with_eager, is_compiled
from framework.check_library.loss_invariance import invariance_note, invariant_parameters
from framework.check_library.model_checks import SETTLE_UPDATES, by_module, fingerprints, named, unmarked_cause
from framework.check_library.module_tracker import matches_any
from framework.core.events import Event
from framework.core.measurements import UPDATE_RATIO
from framework.core.plugin import Plugin, on
from framework.core.state import RunState

register(
    "debug_grad_health",
    "bool | int",
    100,
    "Every N updates (False: off): per-layer gradient norms and |dW|/|W|; warns on vanishing/exploding.",
    __name__,
    range="[0, inf)",
    true_means=10,
)

CHECK, OFF = "gradient health", "debug_grad_health = False"
# A weight whose gradient RMS is below this fraction of the largest weight gradient RMS has vanishing gradients,
VANISHING = 1e-4
# when its update ratio |dW|/|W| is also below this fraction of the median of the other weights' (it hardly learns),
SLOW_UPDATE = 1e-2
# and still so SETTLE_UPDATES updates later, its gradient RMS not grown this many times (not recovering).
RECOVERING = 10.0
# A weight whose initial RMS is at most this fraction of the typical weight's starts (near) zero by design: timm's
# class token (std 1e-6), a zero-initialised output layer. An optimizer's first updates dwarf its norm.
TINY_INIT = 1e-3
# An update larger than this times the parameter's norm is exploding.
EXPLODING_UPDATE = 1.0
# A global gradient norm this many times its earlier median is exploding.
EXPLODING_JUMP = 1e3
# Update ratios are measured on about this many entries per parameter (no model copy).
SAMPLE = 4096


def _sample_index(p: torch.Tensor) -> torch.Tensor | None:
    """About SAMPLE entries of ``p``'s flat view (of this rank's slice if FSDP shards it), drawn at random once;
    None: all of them. Evenly spaced entries would alias with the layout: a stride that is a multiple of 9 reads
    one tap of each 3x3 kernel only, the one that gets no gradient where the feature map is 1x1."""
    numel = sharded.stored(p).numel()
    if numel <= SAMPLE:
        return None
    drawn = torch.randint(numel, (SAMPLE,), generator=torch.Generator().manual_seed(numel))
    return torch.unique(drawn).to(p.device)  # sorted: a gather in memory order


def _sample(p: torch.Tensor, index: torch.Tensor | None) -> torch.Tensor:
    """The entries of ``p`` at ``index`` (from ``_sample_index``)."""
    flat = sharded.stored(p.detach()).reshape(-1)
    return flat if index is None else flat[index]


class GradHealth(Plugin):
    """Per-layer gradient norms and update ratios every ``interval`` updates."""

    provides = (UPDATE_RATIO,)

    def __init__(self, interval: int, frozen: list[str]):
        self.interval = max(1, interval)
        self.frozen = frozen
        self.updates = 0
        self.initial: tuple[list[str], torch.Tensor] | None = None  # names, fingerprints at startup
        self.frozen_initial: tuple[list[str], torch.Tensor] = ([], fingerprints([]))
        self.pending: tuple[list[str], torch.Tensor, list[torch.Tensor]] | None = None
        self.global_norms: list[float] = []
        self.warned: set[tuple[str, str]] = set()
        self.sample_index: dict[str, torch.Tensor | None] = {}  # parameter name -> the entries its updates are read at
        self.zero_init: set[str] = set()  # weights (near) zero at startup (TINY_INIT): their norm grows from zero
        self.suspects: dict[str, tuple[int, int, float]] = {}  # vanishing, unconfirmed: update, step, RMS ratio then
        self.recheck_at: int | None = None  # the update of the check that confirms or clears the suspects
        # In a compiled run, at a check: each parameter's gradient norm in this update (None: no gradient), which a
        # warning compares with an eager step of the batch (compiled_gradients); None in eager runs and between checks.
        self.compiled_grads: dict[str, float | None] | None = None

    @classmethod
    def from_config(cls, config: Config, state: RunState) -> GradHealth | None:
        interval = config.int_or_off("debug_grad_health")
        return cls(interval, list(config.get("frozen_params") or [])) if interval else None

    @on(Event.STARTUP)
    def take_initial(self, state: RunState) -> None:
        params = dict(state.model.named_parameters())
        trainable = [n for n, p in params.items() if p.requires_grad and not matches_any(n, self.frozen)]
        frozen = [n for n in params if matches_any(n, self.frozen)]
        self.initial = (trainable, fingerprints([params[n] for n in trainable]))
        self.frozen_initial = (frozen, fingerprints([params[n] for n in frozen]))
        rms = [
            norm / math.sqrt(max(params[n].numel(), 1))
            for n, norm in zip(trainable, self.initial[1][:, 1].tolist(), strict=True)
        ]
        typical = statistics.median([r for n, r in zip(trainable, rms, strict=True) if params[n].dim() >= 2] or [0.0])
        self.zero_init = {
            n for n, r in zip(trainable, rms, strict=True) if r <= TINY_INIT * typical and params[n].numel()
        }

    @on(Event.BEFORE_OPTIMIZER_STEP)
    def before_update(self, state: RunState) -> None:
        self.updates += 1
        due = self.updates == 1 or self.updates % self.interval == 0 or self.updates == self.recheck_at
        if state.control.update_skipped or not due:
            return
        skip = state.control.any_skip_flag
        if skip is not None and bool(skip):  # a check step syncs anyway
            self.updates -= 1  # look again at the next update: this one is skipped (overflow under loss scaling)
            return
        named = [(n, p) for n, p in state.model.named_parameters() if p.grad is not None]
        if not named:
            return
        grad_norms = sharded.norms([p.grad for _, p in named])
        for n, p in named:
            if n not in self.sample_index:
                self.sample_index[n] = _sample_index(p)
        samples = [_sample(p, self.sample_index[n]).clone() for n, p in named]
        self.pending = ([n for n, _ in named], grad_norms, samples)

    @on(Event.AFTER_OPTIMIZER_STEP)
    def after_update(self, state: RunState) -> None:
        if self.pending is None:
            return
        names, grad_norms, before = self.pending
        self.pending = None
        params = dict(state.model.named_parameters())
        after = [_sample(params[n], self.sample_index[n]) for n in names]
        sampled = [params[n] for n in names]  # under FSDP, the samples of every rank's slice make one sample
        update_norms = sharded.summed_over_shards(
            torch.stack(torch._foreach_norm(torch._foreach_sub(after, before))).double().square(), sampled
        ).sqrt()
        param_norms = sharded.summed_over_shards(
            torch.stack(torch._foreach_norm(before)).double().square(), sampled
        ).sqrt()
        grads, updates, weights = torch.stack([grad_norms, update_norms.float(), param_norms.float()]).tolist()
        if is_compiled(state.step_model):
            self.compiled_grads = dict.fromkeys(params) | dict(zip(names, grads, strict=True))
        self._analyze(state, names, grads, updates, weights, [params[n] for n in names])
        if self.updates >= max(self.interval, SETTLE_UPDATES):
            self.compare_with_initial(state)
        self._check_frozen(state)
        self.compiled_grads = None

    def _analyze(self, state: RunState, names, grads, updates, weights, params) -> None:
        step = state.global_step
        ratios = [u / w if w > 0 else math.inf for u, w in zip(updates, weights, strict=True)]
        rms = [g / math.sqrt(max(p.numel(), 1)) for g, p in zip(grads, params, strict=True)]
        total = math.sqrt(sum(g * g for g in grads))
        finite_ratios = [r for r in ratios if r < math.inf]
        log.v5(
            f"Gradient health at step {step}: global grad norm {total:.3g}, "
            f"|dW|/|W| from {min(finite_ratios, default=0):.2e} to {max(finite_ratios, default=0):.2e}"
        )
        if state.summaries is not None:
            state.summaries.scalars(
                step,
                [(f"grad_health/grad_norm/{n}", g) for n, g in zip(names, grads, strict=True)]
                + [(f"grad_health/update_ratio/{n}", r) for n, r in zip(names, ratios, strict=True) if r < math.inf],
            )
        weight_ratios = [r for r, p in zip(ratios, params, strict=True) if p.dim() >= 2 and r < math.inf]
        if weight_ratios:
            state.store.put(UPDATE_RATIO, max(weight_ratios), by=self)
        weight_rms = [(n, r) for n, r, p in zip(names, rms, params, strict=True) if p.dim() >= 2]
        if len(weight_rms) > 1:
            self._judge_vanishing(state, weight_rms, dict(zip(names, ratios, strict=True)))
        # Weights only: a bias starting near zero has a large ratio after any first update; so has a weight that
        # starts at or near zero (a zero-initialised output layer, a class token) in its first updates, by design.
        settled = self.updates > SETTLE_UPDATES
        exploding = [
            n
            for n, r, w, p in zip(names, ratios, weights, params, strict=True)
            if p.dim() >= 2 and w > 0 and r > EXPLODING_UPDATE and (settled or n not in self.zero_init)
        ]
        lr = state.optimizer.param_groups[0].get("lr")
        self._warn(
            state,
            "exploding update",
            exploding,
            lambda which: (
                f"exploding updates at step {step}: {which} changed by more than their own norm "
                f"(|dW|/|W| up to {max(ratios[names.index(n)] for n in exploding):.3g}) in one update. The learning rate "
                f"({lr:g}) is probably too high; lower it or clip gradients (gradient_clip_global_norm)."
            ),
            fix=f"Lower the learning rate ({lr:g}) or clip gradients (gradient_clip_global_norm).",
            numbers=lambda: {
                "step": step,
                "learning_rate": lr,
                "update_ratios": {n: ratios[names.index(n)] for n in exploding},
            },
        )
        # Above every earlier norm too: once the loss is near zero (well separated data), the median is tiny
        # and one harder batch is a thousand times above it, but not above the gradients of the first steps.
        if (
            len(self.global_norms) >= 2
            and total > EXPLODING_JUMP * statistics.median(self.global_norms)
            and total > max(self.global_norms)
        ):
            self._warn(
                state,
                "exploding gradient",
                ["(global)"],
                lambda _: (
                    f"exploding gradients at step {step}: the global gradient norm is {total:.3g}, over "
                    f"{EXPLODING_JUMP:g} x its median so far ({statistics.median(self.global_norms):.3g})."
                ),
                fix="Clip gradients (gradient_clip_global_norm) or lower the learning rate.",
                numbers=lambda: {
                    "step": step,
                    "global_norm": total,
                    "median_so_far": statistics.median(self.global_norms),
                    "max_so_far": max(self.global_norms),
                },
            )
        self.global_norms.append(total)

    def _judge_vanishing(self, state: RunState, weight_rms: list[tuple[str, float]], ratios: dict[str, float]) -> None:
        """Suspect the weights whose gradient is tiny and whose update hardly moves them; warn when it persists."""
        step, now = state.global_step, self.updates
        largest_name, largest = max(weight_rms, key=lambda x: x[1])
        tiny = {n: r / largest for n, r in weight_rms if r < VANISHING * largest}
        learning = [ratios[n] for n, _ in weight_rms if n not in tiny and ratios[n] < math.inf]
        typical = statistics.median(learning) if learning else 0.0
        slow = {n: r for n, r in tiny.items() if ratios[n] < SLOW_UPDATE * typical}
        for name, relative in slow.items():
            since, since_step, then = self.suspects.get(name, (now, step, relative))
            if relative > RECOVERING * then:  # growing as the weights that block it move: judge again later
                since, since_step, then = now, step, relative
            self.suspects[name] = (since, since_step, then)
        self.suspects = {n: v for n, v in self.suspects.items() if n in slow and (_VANISHING, n) not in self.warned}
        confirmed = [n for n, (since, _, _) in self.suspects.items() if now - since >= SETTLE_UPDATES]
        first = min((self.suspects[n][1] for n in confirmed), default=step)
        self._warn(
            state,
            _VANISHING,
            confirmed,
            lambda which: (
                f"vanishing gradients from step {first} to step {step}: {which} have a gradient RMS below "
                f"{VANISHING:g} x that of '{largest_name}' ({largest:.2e}) and updates |dW|/|W| below {SLOW_UPDATE:g} "
                f"x the other weights' (median {typical:.2e}): they hardly learn."
            ),
            cause="Deep stacks of sigmoid/tanh, a bad initialization or a missing normalization/residual connection "
            "are typical causes.",
            fix="Add normalization or residual connections, prefer ReLU-family activations to deep sigmoid/tanh "
            "stacks, or initialize the weights for their depth.",
            numbers=lambda: {
                "from_step": first,
                "step": step,
                "largest_rms": {largest_name: largest},
                "rms_relative_to_largest": {n: tiny.get(n) for n in confirmed},
                "median_update_ratio": typical,
            },
        )
        for name in confirmed:
            del self.suspects[name]
        pending = [since for since, _, _ in self.suspects.values()]
        self.recheck_at = min(pending) + SETTLE_UPDATES if pending else None
        if self.recheck_at is not None and self.recheck_at <= now:
            self.recheck_at = now + 1

    @on(Event.EPOCH_END)
    def epoch_end(self, state: RunState) -> None:
        """Judge the parameters that never changed, once enough updates happened for it (see compare_with_initial)."""
        if self.updates >= SETTLE_UPDATES:
            self.compare_with_initial(state)

    def compare_with_initial(self, state: RunState) -> None:
        """Name the parameters that never changed since startup although they require grad (once)."""
        if self.initial is None:
            return
        names, before = self.initial
        self.initial = None
        params = dict(state.model.named_parameters())
        still = [n for n in _unchanged(names, before, params) if params[n].requires_grad]
        redundant = invariant_parameters(state, still)  # zero gradient by the loss's construction: a note
        still = [n for n in still if n not in redundant]
        if redundant:
            report(dataclasses.replace(invariance_note(state.model, redundant, self.updates), check=CHECK, option=OFF))
        if still:
            evidence: dict[str, Any] = {"updates": self.updates}
            cause = unmarked_cause(state.optimizer, state.model, still, evidence) or (
                ": no gradient reaches them, their gradient is zero, or the optimizer does not hold them. If that is "
                "intended, list them in frozen_params"
            )
            text = self._with_eager_comparison(
                state,
                still,
                f"{by_module(state.model, still)} did not change in {self.updates} updates although they require grad",
                f"{cause}.",
                evidence,
            )
            report(
                Finding(
                    "warning",
                    CHECK,
                    text,
                    evidence=evidence,
                    where=named(still),
                    fix=f"Mark the loss meant to train them with optimizer={evidence['optimizers'][0]!r}, or list them "
                    f"in frozen_params."
                    if "optimizers" in evidence
                    else "Connect them to the loss, or list them in frozen_params if they are meant to stay.",
                    option=OFF,
                )
            )
        self._check_frozen(state)

    def _check_frozen(self, state: RunState) -> None:
        names, before = self.frozen_initial
        if not names:
            return
        params = dict(state.model.named_parameters())
        kept = set(_unchanged(names, before, params))
        # Only what the optimizer can move: a declared-frozen parameter that does not require grad and changed was
        # written by the user's own code (an EMA copy, a running quantity), as intended.
        changed = [n for n in names if n not in kept and params[n].requires_grad]
        self._warn(
            state,
            "frozen changed",
            changed,
            lambda which: (
                f"frozen_params: {which} changed during training (after {self.updates} updates) although "
                f"they are declared frozen. Set requires_grad_(False) on them or leave them out of the optimizer."
            ),
            fix="Set requires_grad_(False) on them or leave them out of the optimizer.",
            numbers=lambda: {"updates": self.updates},
        )

    def _warn(
        self,
        state: RunState,
        kind: str,
        names: list[str],
        message: Any,
        cause: str = "",
        *,
        fix: str,
        numbers: Callable[[], dict[str, Any]],
    ) -> None:
        """Report ``message(which)`` for the parameters ``names`` not yet warned of as ``kind``; ``cause`` (the
        model's usual causes) is judged against an eager step in a compiled run. ``fix`` says what to do,
        ``numbers()`` gives the evidence (called only when there is something to report: most steps have none)."""
        new = [n for n in names if (kind, n) not in self.warned]
        if not new:
            return
        self.warned.update((kind, n) for n in new)
        which = "the global norm" if new == ["(global)"] else by_module(state.model, new)
        evidence: dict[str, Any] = {"kind": kind, **numbers()}
        text = self._with_eager_comparison(state, new, message(which), f" {cause}" if cause else "", evidence)
        where = {"parameters": new} if new == ["(global)"] else named(new)
        report(Finding("warning", CHECK, text, evidence=evidence, where=where, fix=fix, option=OFF))

    def _with_eager_comparison(
        self, state: RunState, names: list[str], facts: str, cause: str, evidence: dict[str, Any]
    ) -> str:
        """``facts`` and the model's usual ``cause``; in a compiled run at a check, what an eager step of the same
        batch says about ``names`` replaces ``cause`` (a compiler problem) or follows it (eager mode agrees)."""
        if self.compiled_grads is None or state.batch is None:
            return facts + cause
        compared = compare_with_eager(state, self.compiled_grads, names)
        evidence["eager step"] = {"max_rel_diff": compared.max_rel_diff, "differ": sorted(compared.differ)}
        if compared.differ:
            return f"{facts.rstrip('.')}. {compared.sentence()}"
        return f"{facts}{cause} {compared.sentence()}"


def _unchanged(names: list[str], before: torch.Tensor, params: dict[str, torch.Tensor]) -> list[str]:
    """The parameters whose fingerprint is still the one taken before."""
    same = (fingerprints([params[n] for n in names]) == before).all(dim=1).tolist()
    return [n for n, kept in zip(names, same, strict=True) if kept]


_VANISHING = "vanishing"

PLUGINS = (GradHealth,)
