"""An error score of predictions the loss calls perfect (``debug_perfect_predictions``, on by default).

Whatever an error score measures (a classification error, a Hamming error over tags, a token error that skips
padding, a regression error in the data's units), predictions equal to the targets must score 0 on it. A score
that does not measures something else than the loss trains: a decision rule that does not match the loss (a softmax
where the loss applies a sigmoid per tag, another threshold), positions the loss ignores counted as wrong, a target
compared in other units. Nothing errs, and the run's reported error is worse than the model.

The experiment, before the first step, on copies of the model, running ``train_step`` as a dev set is evaluated:
the first run watches the loss functions whose target is a value of the batch (``cross_entropy`` over class ids,
``binary_cross_entropy_with_logits`` over 0/1 targets, the regression losses) and finds the module whose output
they score. The second run replaces exactly those scores with the targets' own perfect scores (0 at the target
class and -``MARGIN`` elsewhere: log-probabilities, so a z-loss on their normaliser is at its minimum too;
+/-``MARGIN`` for tags, the target itself for a regression; positions a loss ignores
keep the model's scores). When every watched loss then sits at its minimum, each error score (``as_error``) that
moved toward 0 but stayed at least ``LEFT`` is a warning.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn
from torch.overrides import TorchFunctionMode

from framework.base import log
from framework.base.config import Config
from framework.base.errors import ModelCheckError
from framework.base.findings import Finding
from framework.base.options import register
from framework.check_library.probe import PROBE_SESSION, ProbeLimit, ProbeSession
from framework.check_library.tensors import format_frame, same_values, user_frame
from framework.core.events import Event, Order
from framework.core.plugin import Plugin, on
from framework.core.run_ctx import RunCtx
from framework.core.state import RunState
from framework.debug.sanity import report_findings

CHECK = "perfect-predictions check"
register(
    "debug_perfect_predictions",
    "bool",
    True,
    "Before the first step, on copies as dev is evaluated: give the losses the targets' own perfect scores and warn "
    "when an error score (as_error) stays above 0 (it measures something else than the loss trains).",
    __name__,
)

MARGIN = 30.0  # a logit this far from the others: the loss of a perfect prediction, to float precision
AT_MINIMUM = 1e-4  # a watched loss at most this under perfect scores is at its minimum
LEFT = 0.02  # an error score at least this under perfect predictions did not reach 0
# The constant run predicts a class of at least DOMINANT of the targets everywhere (a background class: silence, 'O',
# the empty pixel; no tag for 0/1 tags). An error rate of the targets is at most 1 / DOMINANT then, whatever counts as
# an error (an edit rate's insertions included: at most one per position, against at least DOMINANT targets per
# position), so above BEYOND it is divided by something the predictions make.
DOMINANT = 0.5
BEYOND = 1 / DOMINANT
_LOSSES = (F.cross_entropy, F.binary_cross_entropy_with_logits, F.mse_loss, F.l1_loss, F.smooth_l1_loss, F.huber_loss)


@dataclass
class _Scored:
    """A loss call whose input is (a view of) a module's output and whose target is a value of the batch."""

    loss: str
    call: int  # the how-manieth watched loss call of the step
    where: str
    module: tuple[str, int]  # (module path, its call number in the step)
    view: tuple[tuple[int, ...], tuple[int, ...], int]  # the input's size, stride and offset within that output
    perfect: torch.Tensor  # the perfect scores, in the input's shape (ignored positions: the model's)
    constant: torch.Tensor | None = None  # one prediction everywhere: the most frequent target class, or nothing
    predicted: str = ""  # what ``constant`` predicts, in words


class PerfectPredictions(Plugin):
    """Runs the watched and the perfect run once, before the first step."""

    bug_check = ("debug_perfect_predictions",)
    order = Order.CHECK
    needs = (PROBE_SESSION,)

    @classmethod
    def from_config(cls, config: Config, state: RunState) -> PerfectPredictions | None:
        return cls() if config.bool("debug_perfect_predictions") else None

    @on(Event.STEP_START, once=True)
    def probe(self, state: RunState) -> None:
        session = state.store.get(PROBE_SESSION)
        if session is None:
            return
        try:
            scored, before, crossed = _run(session, state.batch, None)
            if not scored or not any(m.as_error for m in before.losses.values()):
                return
            checked, after, _ = _run(session, state.batch, scored)
        except ProbeLimit as exc:
            log.v5(f"Perfect-predictions check skipped: a run failed ({exc}).")
            return
        if any(checked.get(s.call, float("inf")) > AT_MINIMUM for s in scored):
            return  # a watched loss is not at its minimum: the perfect scores are not what it trains toward
        if any(_moved_off_minimum(marked, after.losses.get(name)) for name, marked in before.losses.items()):
            return  # another term of the objective (a teacher's soft targets) does not call these scores perfect
        findings = []
        for name, marked in before.losses.items():
            if not marked.as_error or name not in after.losses:
                continue
            was, now = _value(marked), _value(after.losses[name])
            if 0 <= now < was <= 1 and now >= LEFT:
                findings.append(_finding(name, was, now, scored, crossed.get(name)))
        if not findings:
            findings = self._constant_predictions(session, state, scored, before, after)
        if findings:
            report_findings(
                state, "first step", findings[:1], ModelCheckError, False, off="debug_perfect_predictions = False"
            )

    @staticmethod
    def _constant_predictions(
        session: ProbeSession, state: RunState, scored: list[_Scored], before: RunCtx, after: RunCtx
    ) -> list[Finding]:
        """The third run: one prediction everywhere (a background class of at least DOMINANT of the targets; for 0/1
        tags, none). An error score at 0 for perfect predictions and within [0, 1] for the model's that exceeds
        ``BEYOND`` then is no rate of the targets: it is divided by something the predictions make."""
        rates = {
            name: (_value(marked), _value(after.losses[name]))
            for name, marked in before.losses.items()
            if marked.as_error and name in after.losses
        }
        rates = {name: v for name, v in rates.items() if 0 <= v[0] <= 1 and 0 <= v[1] < LEFT}
        if not rates or any(s.constant is None for s in scored):
            return []
        constant = [dataclasses.replace(s, perfect=s.constant) for s in scored]
        try:
            _, one, _ = _run(session, state.batch, constant)
        except ProbeLimit as exc:
            log.v5(f"Perfect-predictions check: the constant-prediction run failed ({exc}).")
            return []
        for name, (was, now) in rates.items():
            value = _value(one.losses[name]) if name in one.losses else 0.0
            if value > BEYOND:
                return [_beyond_finding(name, was, now, value, scored)]
        return []


def _beyond_finding(name: str, was: float, now: float, value: float, scored: list[_Scored]) -> Finding:
    first = scored[0]
    losses = ", ".join(f"{s.loss} at {s.where}" for s in scored[:2])
    return Finding(
        "warning",
        "sanity check",
        f"The error score {name!r} is {value:.3g} when the model predicts {first.predicted} everywhere: on a copy, "
        f"evaluated as dev is, the scores that {losses} gets (the output of module {first.module[0]!r}) were replaced "
        f"by that one prediction, while {name!r} is {now:.3g} for perfect predictions and {was:.3g} for the model's. "
        f"An error rate of the targets is at most {BEYOND:g} then (at most one error per position, insertions "
        f"included, against a class that holds half the targets or more); {name!r} is divided by "
        f"something the predictions make, which shrinks when the model predicts little: the predictions' count where "
        f"the targets' belongs (an edit-distance rate such as a WER with the hypothesis in the reference's place, a "
        f"precision where the error of a recall is meant).",
        evidence={"error_model": was, "error_perfect": now, "error_constant": value, "predicted": first.predicted},
        where={"error": name, "module": first.module[0], "line": first.where},
        fix=f"Divide {name!r} by the targets' count (in a WER: pass the reference as the reference, the "
        "hypothesis as the hypothesis).",
    )


def _value(marked: Any) -> float:
    return float(marked.normalized().detach().float())


def _moved_off_minimum(before: Any, after: Any) -> bool:
    """Whether an optimised loss changed under the perfect scores without reaching a minimum of 0: the objective
    has a term of its own on those scores, so they are not what the whole objective calls perfect."""
    if before.as_error or after is None:
        return False
    was, now = _value(before), _value(after)
    return abs(now - was) > 1e-3 * max(abs(was), 1e-12) and now > AT_MINIMUM


def _finding(name: str, was: float, now: float, scored: list[_Scored], crossed: str | None) -> Finding:
    first = scored[0]
    where: dict[str, Any] = {"error": name, "module": first.module[0], "line": first.where}
    evidence = {"error_before": was, "error_perfect": now, "losses": [s.loss for s in scored]}
    if crossed is not None:  # the experiment's run traced the score to an operation that paired every row with every
        where["broadcast"] = crossed
        return Finding(
            "warning",
            "sanity check",
            f"The error score {name!r} is {now:.3g} for predictions that the loss calls perfect (on a copy, evaluated "
            f"as dev is, with the scores of {first.loss} at {first.where} replaced by perfect ones; it went only from "
            f"{was:.3g} to {now:.3g}), and it is computed from {crossed}: two tensors of one batch broadcast against "
            f"each other, so every example is compared with every other example's target, not with its own (a "
            f"[B] tensor against a [B, 1] one).",
            evidence=evidence,
            where=where,
            fix="Give both sides of that comparison the same shape (squeeze the [B, 1] one, or compare [B, 1] with "
            "[B, 1]).",
        )
    losses = ", ".join(f"{s.loss} at {s.where}" for s in scored[:2])
    perfect = {
        "cross_entropy": f"0 at each target class and -{MARGIN:g} elsewhere",
        "binary_cross_entropy_with_logits": f"+{MARGIN:g} where the target is 1 and -{MARGIN:g} where it is 0",
    }.get(first.loss, "the targets themselves")
    return Finding(
        "warning",
        "sanity check",
        f"The error score {name!r} is {now:.3g} for predictions that the loss calls perfect: on a copy, evaluated as "
        f"dev is, the scores that {losses} gets (the output of module {where['module']!r}) were replaced by perfect ones "
        f"({perfect}) and the loss "
        f"fell to its minimum, but {name!r} went only from {was:.3g} to {now:.3g}. An error score of predictions equal "
        f"to the targets is 0: {name!r} measures something else than the loss trains (a decision rule that does not "
        f"match the loss, such as a softmax where the loss applies a sigmoid per label or another threshold; "
        f"positions the loss ignores counted as errors; targets in other units).",
        evidence=evidence,
        where=where,
        fix=f"Compute {name!r} from the loss's own decisions (cross_entropy: argmax; binary_cross_entropy_with_logits: "
        "logit > 0) over the positions the loss scores.",
    )


def _run(
    session: ProbeSession, batch: dict[str, Any], perfect: list[_Scored] | None
) -> tuple[Any, RunCtx, dict[str, str]]:
    """``train_step`` as dev is evaluated, on a copy: watching the losses (``perfect`` None: their scored calls), or
    with their scores replaced by ``perfect`` (then: each watched loss's value); and the error scores computed from
    a batch crossed with itself (score name -> the operation and line)."""
    with session.isolated(CHECK) as model, torch.no_grad():
        watch = _Watch(model, batch, perfect)
        with watch:
            run_ctx = session.changed_run(CHECK, model, batch, stage="eval", optional=True)
        watch.remove()
    crossed = {
        name: watch.crossed[id(marked.loss)]
        for name, marked in run_ctx.losses.items()
        if marked.as_error and id(marked.loss) in watch.crossed
    }
    return (watch.scored if perfect is None else watch.values), run_ctx, crossed


class _Watch(TorchFunctionMode):
    def __init__(self, model: nn.Module, batch: dict[str, Any], perfect: list[_Scored] | None):
        super().__init__()
        self.batch = [t for t in batch.values() if isinstance(t, torch.Tensor)]
        self.perfect = perfect
        self.scored: list[_Scored] = []
        self.values: dict[int, float] = {}  # watched loss call -> its value (the run with perfect scores)
        self.loss_calls = 0
        self.outputs: list[tuple[tuple[str, int], torch.Tensor]] = []  # in the order the modules finished
        self.calls: dict[str, int] = {}
        self.handles = [
            module.register_forward_hook(self._hook(path or "(model)")) for path, module in model.named_modules()
        ]
        # Tensors computed from an elementwise operation that crossed the batch with itself (an output with two axes
        # of the batch size, larger than each input), and everything computed from them: id -> the operation.
        sizes = {t.shape[0] for t in self.batch if t.dim() > 0}
        self.batch_size = sizes.pop() if len(sizes) == 1 else 0
        self.crossed: dict[int, str] = {}
        self._kept: list[torch.Tensor] = []  # the crossed tensors, alive so that their ids stay theirs

    def remove(self) -> None:
        for handle in self.handles:
            handle.remove()

    def _hook(self, path: str) -> Any:
        def hook(_module: nn.Module, _args: Any, output: Any) -> Any:
            if not isinstance(output, torch.Tensor) or not output.is_floating_point():
                return None
            number = self.calls[path] = self.calls.get(path, -1) + 1
            key = (path, number)
            if self.perfect is not None:
                replaced = [p for p in self.perfect if p.module == key]
                if replaced:
                    output = _with_perfect(output, replaced)
            self.outputs.append((key, output))
            return output if self.perfect is not None else None

        return hook

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        if self.batch_size > 1 and isinstance(out, torch.Tensor):
            self._trace_crossing(func, [*args, *kwargs.values()], out)
        if func in _LOSSES:
            if self.perfect is None:
                self._record(func, args, kwargs)
            elif isinstance(out, torch.Tensor) and out.numel() == 1:
                self.values[self.loss_calls] = float(out)
            self.loss_calls += 1
        return out

    def _trace_crossing(self, func: Any, args: list, out: torch.Tensor) -> None:
        inputs = [a for a in args if isinstance(a, torch.Tensor)]
        inputs += [t for a in args if isinstance(a, list | tuple) for t in a if isinstance(t, torch.Tensor)]
        origin = next((self.crossed[id(t)] for t in inputs if id(t) in self.crossed), None)
        if origin is None and len(inputs) >= 2 and _crosses(inputs, out, self.batch_size):
            shapes = " and ".join(str(list(t.shape)) for t in inputs)
            name = getattr(func, "__name__", str(func))
            origin = f"{name} at {format_frame(user_frame())} (shapes {shapes} -> {list(out.shape)})"
        if origin is not None:
            self.crossed[id(out)] = origin
            self._kept.append(out)

    def _record(self, func: Any, args: tuple, kwargs: dict) -> None:
        scores = args[0] if args else kwargs.get("input")
        target = args[1] if len(args) > 1 else kwargs.get("target")
        if not isinstance(scores, torch.Tensor) or not isinstance(target, torch.Tensor):
            return
        if not any(same_values(target, t) for t in self.batch):
            return  # a target the step made (sampled actions, shifted copies): its perfect scores are not known
        perfect = _perfect_scores(func, scores, target, kwargs)
        constant, predicted = _constant_scores(func, scores, target, kwargs) if perfect is not None else (None, "")
        producer = next(
            (
                key
                for key, out in self.outputs
                if out.untyped_storage().data_ptr() == scores.untyped_storage().data_ptr()
            ),
            None,
        )
        if perfect is None or producer is None:
            return
        output = dict(self.outputs)[producer]
        offset = scores.storage_offset() - output.storage_offset()
        view = (tuple(scores.shape), tuple(scores.stride()), offset)
        where = format_frame(user_frame())
        self.scored.append(
            _Scored(func.__name__, self.loss_calls, where, producer, view, perfect.detach(), constant, predicted)
        )


def _crosses(inputs: list[torch.Tensor], out: torch.Tensor, size: int) -> bool:
    """Whether ``out`` is the broadcast of ``inputs`` in which two axes of the batch ``size`` meet: one input holds
    the batch along one of them (and 1 along the other), another input the other way round ([B] against [B, 1])."""
    try:
        if torch.broadcast_shapes(*(t.shape for t in inputs)) != out.shape:
            return False  # not an elementwise broadcast (a matmul, a reduction, a cat)
    except RuntimeError:
        return False
    aligned = [(1,) * (out.dim() - t.dim()) + tuple(t.shape) for t in inputs]
    axes = [i for i, n in enumerate(out.shape) if n == size]
    return any(
        any(a[i] == size and a[j] == 1 for a in aligned) and any(a[j] == size and a[i] == 1 for a in aligned)
        for i in axes
        for j in axes
        if i != j
    )


def _perfect_scores(func: Any, scores: torch.Tensor, target: torch.Tensor, kwargs: dict) -> torch.Tensor | None:
    if func is F.cross_entropy:
        if target.is_floating_point() or kwargs.get("label_smoothing") or scores.dim() < 1:
            return None
        classes = scores.shape[1] if scores.dim() > 1 else scores.shape[0]
        ignored = target == int(kwargs.get("ignore_index", -100))
        if bool(((target < 0) | (target >= classes))[~ignored].any()):
            return None
        return _predicting(scores, target.masked_fill(ignored, 0), ignored)
    if func is F.binary_cross_entropy_with_logits:
        if target.shape != scores.shape or not bool(((target == 0) | (target == 1)).all()):
            return None
        return (target.to(scores.dtype) * 2 - 1) * MARGIN
    if target.shape != scores.shape:  # a regression loss that broadcasts: its perfect prediction is not one tensor
        return None
    return target.to(scores.dtype)


def _predicting(scores: torch.Tensor, classes: torch.Tensor, ignored: torch.Tensor) -> torch.Tensor:
    """cross_entropy scores that predict ``classes`` with certainty, where a loss ignores a position the model's own.
    Log-probabilities (0 at the class, -MARGIN elsewhere), not just logits: a term on the normaliser (a z-loss on
    logsumexp) is at its minimum too."""
    axis = 1 if scores.dim() > 1 else 0
    hot = F.one_hot(classes.long(), scores.shape[axis]).movedim(-1, axis)
    predicted = (hot.to(scores.dtype) - 1) * MARGIN
    return torch.where(ignored.unsqueeze(axis).expand_as(predicted), scores.detach(), predicted)


def _constant_scores(
    func: Any, scores: torch.Tensor, target: torch.Tensor, kwargs: dict
) -> tuple[torch.Tensor | None, str]:
    """Scores that predict one thing everywhere (positions a loss ignores keep the model's): the most frequent target
    class for cross_entropy, no tag for 0/1 tags; (None, "") for the other losses."""
    if func is F.cross_entropy:
        ignored = target == int(kwargs.get("ignore_index", -100))
        counted = target[~ignored]
        if counted.numel() == 0:
            return None, ""
        counts = torch.bincount(counted.flatten().long())
        majority = int(counts.argmax())
        share = float(counts[majority]) / counted.numel()
        if share < DOMINANT:
            return None, ""  # no background class: one class everywhere would be a prediction, not none
        predicted = f"class {majority} (of {share:.0%} of the batch's targets)"
        return _predicting(scores, torch.full_like(target, majority), ignored), predicted
    if func is F.binary_cross_entropy_with_logits:
        return torch.full_like(scores.detach(), -MARGIN), "no tag (every logit at -30)"
    return None, ""


def _with_perfect(output: torch.Tensor, replaced: list[_Scored]) -> torch.Tensor:
    """``output`` with the views that the losses score set to their perfect scores (a new tensor, same layout)."""
    new = torch.empty_strided(output.size(), output.stride(), dtype=output.dtype, device=output.device)
    new.copy_(output)
    for scored in replaced:
        size, stride, offset = scored.view
        view = new.as_strided(size, stride, new.storage_offset() + offset)
        view.copy_(scored.perfect.to(view.device, view.dtype))
    return new


PLUGINS = (PerfectPredictions,)
