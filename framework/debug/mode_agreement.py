"""Do the training path and the evaluation path compute the same thing? (``debug_mode_agreement``, on by default.)

An evaluation runs ``train_step`` with the model in eval mode. A model whose own code reads ``self.training`` can
then compute something other than what training optimised: an output transform that undoes a target
normalisation only in eval mode while the step still compares with normalised targets, a branch that returns
probabilities where training returned logits, another head. Every dev score then measures that branch, and
nothing fails.

Two paths that must agree, tested on copies at the first step, and only for a model with a module outside
``torch.nn`` whose forward reads ``self.training``: the first sequences of the batch run through ``train_step``
in training mode and as an evaluation does. Dropout, batch norm at its initial statistics and training-only
noise make an evaluation at most somewhat worse (usually better); where a loss is ``GAP`` times larger in
evaluation, each such module in turn runs its own forward in training mode inside the evaluation, everything
else as before. The module whose switch closes the gap is named, with how its eval output relates to its
training-mode output (an affine rescaling is measured as such). Where no single module closes the gap, nothing
is claimed (verbosity 5 says what was seen).
"""

from __future__ import annotations

import torch

from framework.base import log
from framework.base.config import Config
from framework.base.errors import ModelCheckError
from framework.base.findings import Finding
from framework.base.options import register
from framework.check_library.mode_dependence import reads_training_flag
from framework.check_library.model_checks import ROOT, capture_outputs
from framework.check_library.probe import PROBE_SESSION, ProbeLimit, ProbeSession
from framework.core.events import Event
from framework.core.plugin import Order, Plugin, on
from framework.core.run_ctx import RunCtx
from framework.core.state import RunState
from framework.debug.sanity import report_findings

CHECK = "mode-agreement check"
OFF = "debug_mode_agreement = False"

register(
    "debug_mode_agreement",
    "bool",
    True,
    "First step, for a model whose own code reads self.training: a loss far larger when the first sequences run as "
    "an evaluation than in training mode, traced to the module whose eval-mode branch computes something else.",
    __name__,
)

GAP = 10.0  # an eval loss this many times the training-mode loss on the same sequences is no dropout effect
CLOSED = 2.0  # a switched module whose evaluation gives at most this many times the training loss explains the gap
SUB_BATCH = 4
CANDIDATES = 3


def _losses(run_ctx: RunCtx) -> dict[str, float]:
    """The optimised losses of a run, as numbers."""
    return {
        name: float(marked.loss.detach().float().mean())
        for name, marked in run_ctx.losses.items()
        if not marked.as_error
    }


def affine_relation(evaluated: torch.Tensor, trained: torch.Tensor) -> tuple[float, float] | None:
    """(a, b) when ``evaluated`` = a * ``trained`` + b almost exactly (least squares, R^2 > 0.999), else None."""
    y, x = evaluated.detach().double().flatten(), trained.detach().double().flatten()
    if x.numel() != y.numel() or x.numel() < 3 or float(x.var()) == 0.0:
        return None
    a = float(((x - x.mean()) * (y - y.mean())).mean() / x.var(unbiased=False))
    b = float(y.mean() - a * x.mean())
    residual = float(((y - (a * x + b)) ** 2).mean())
    return (a, b) if residual <= 1e-3 * float(y.var(unbiased=False)) + 1e-12 else None


class ModeAgreement(Plugin):
    """Runs the first sequences in both modes; on a large gap, finds the module whose eval branch causes it."""

    bug_check = ("debug_mode_agreement",)

    order = Order.CHECK
    needs = (PROBE_SESSION,)

    @classmethod
    def from_config(cls, config: Config, state: RunState) -> ModeAgreement | None:
        return cls() if config.bool("debug_mode_agreement") else None

    @on(Event.STEP_START, once=True)
    def probe(self, state: RunState) -> None:
        session = state.store.get(PROBE_SESSION)
        candidates = [name for name, m in state.model.named_modules() if reads_training_flag(type(m))][:CANDIDATES]
        if session is None or not candidates:
            return
        size = min(SUB_BATCH, len(state.batch_indices))
        try:
            finding = self._judge(session, {k: t[:size] for k, t in state.batch.items()}, candidates, size)
        except ProbeLimit as exc:
            log.v5(f"Mode-agreement check skipped: a run of the first sequences failed ({exc}).")
            return
        if finding is not None:
            report_findings(state, "first step", [finding], ModelCheckError, False, off=OFF)

    def _judge(
        self, session: ProbeSession, batch: dict[str, torch.Tensor], candidates: list[str], size: int
    ) -> Finding | None:
        trained, _ = self._run(session, batch, "train", candidates)
        evaluated, outputs = self._run(session, batch, "eval", candidates)
        gaps = {
            name: (trained[name], loss)
            for name, loss in evaluated.items()
            if name in trained and trained[name] > 0 and loss > GAP * trained[name]
        }
        if not gaps:
            return None
        loss, (train_value, eval_value) = next(iter(gaps.items()))
        for candidate in candidates:
            switched, switched_outputs = self._run(session, batch, "eval", candidates, switch=candidate)
            if switched.get(loss, float("inf")) > CLOSED * train_value:
                continue
            relation = None
            if candidate in outputs and candidate in switched_outputs:
                relation = affine_relation(outputs[candidate], switched_outputs[candidate])
            return self._finding(candidate, loss, train_value, eval_value, switched[loss], relation, size)
        log.v5(
            f"Mode-agreement check: on the first {size} sequences {loss!r} is {eval_value:.4g} as an evaluation and "
            f"{train_value:.4g} in training mode; no single module among {', '.join(candidates)} switched to "
            f"training mode closes the gap, so no cause is named."
        )
        return None

    @staticmethod
    def _run(
        session: ProbeSession, batch: dict[str, torch.Tensor], stage: str, names: list[str], switch: str | None = None
    ) -> tuple[dict[str, float], dict[str, torch.Tensor]]:
        """The losses of one run of ``train_step`` on a copy (``switch``: a module run in training mode inside an
        evaluation), and the first outputs of the ``names`` modules."""
        with session.isolated(CHECK, train=stage == "train") as model:
            if switch is not None:
                dict(model.named_modules())[switch].training = True  # its own forward only, not its children
            with capture_outputs(model, [name or ROOT for name in names]) as captured, torch.no_grad():
                run_ctx = session.changed_run(CHECK, model, batch, stage=stage)
        return _losses(run_ctx), {name: captured[name or ROOT][0] for name in names if captured.get(name or ROOT)}

    @staticmethod
    def _finding(
        module: str,
        loss: str,
        train_value: float,
        eval_value: float,
        switched_value: float,
        relation: tuple[float, float] | None,
        size: int,
    ) -> Finding:
        shown = module or "the model"
        how = (
            f" Its eval output is its training-mode output rescaled, x {relation[0]:.4g} + {relation[1]:.4g}: the "
            f"evaluation compares values in another scale than the loss was trained on."
            if relation is not None and (abs(relation[0] - 1) > 0.01 or abs(relation[1]) > 0.01)
            else ""
        )
        return Finding(
            "warning",
            "sanity check",
            f"The evaluation path computes something else than the training path: on the first {size} sequences of "
            f"the batch, {loss!r} is {eval_value:.4g} when they run as an evaluation does and {train_value:.4g} in "
            f"training mode. The gap closes ({switched_value:.4g}) when module {shown!r} alone runs its forward in "
            f"training mode inside the evaluation: its eval-mode branch (its code reads self.training) is what every "
            f"dev score measures.{how} Make the eval branch compute what the loss expects (or transform the targets "
            f"the same way in evaluation), and keep inference-only transforms out of the forward train_step calls.",
            evidence={
                "loss": loss,
                "train_mode": train_value,
                "eval_mode": eval_value,
                "eval_with_module_in_training_mode": switched_value,
                **({"rescaling": list(relation)} if relation is not None else {}),
            },
            where={"module": shown},
            fix=f"make {shown!r}'s eval-mode branch compute what train_step's loss compares",
            option=OFF,
        )


PLUGINS = (ModeAgreement,)
