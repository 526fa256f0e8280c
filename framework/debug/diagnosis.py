"""From a symptom to its cause: the differential diagnosis (``debug_diagnose_symptoms``, on by default).

When the learning watch sees a symptom (a loss at its chance level or not decreasing, dev at chance while
train fell), it hands it here instead of guessing a cause. A ladder of checks, cheapest first, each rules a
family of causes in or out:

1. the losses get what their contracts expect (what the first step's loss-input check found);
2. the optimizer and its schedule do what was meant (the learning rates applied over the run, the latest
   update ratio: ``framework.check_library.schedule_trace``);
3. the data carries information (per key over a few train batches: nearly constant values, one id that
   dominates, labels of one class: ``framework.check_library.input_information``);
4. the model reads its input (a gradient dependency map on a model copy: predictions that depend on the
   padding and not on the real tokens, or on nothing: ``framework.check_library.dependency_map``);
5. the model can learn (a copy fits one batch; units of a layer that are identical; parameters that get
   gradients and never changed since the first step: ``framework.check_library.can_learn``);
6. for a train loss that fell while dev did not: the two paths agree (the same train batches through training
   mode and the way dev is evaluated, eval mode without gradients: RETURNN's ``devtrain``, on a copy).

A family is ruled in only by a measurement that tells it apart from the others (a gradient that reaches the
padding, an id that fills the input, the same batches losing what they learned in eval mode); the first one
ruled in is the cause, and the finding (one, in the symptom's line) gives it with its evidence and what was
ruled out before it. What a check observed without deciding (a copy that did not fit one batch with the fit's
own optimizer) and what is ruled out by elimination name no cause: the finding says "not decided yet", what was
observed and ruled out, and the next experiment that would decide, as an option to run. Checks that run code run on copies in the probe session's isolation, only when a
symptom appears; a healthy run pays one fingerprint of the parameters before its first step.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch

from framework.base import log
from framework.base.config import Config
from framework.base.findings import Finding, report
from framework.base.options import register
from framework.check_library.can_learn import (
    FIT_LEARNING_RATE,
    FIT_STEPS,
    Fit,
    fingerprint,
    fit_one_batch,
    identical_units,
    unchanged,
)
from framework.check_library.dependency_map import DependencyMap, dependency_map
from framework.check_library.input_information import NEARLY_CONSTANT, data_information
from framework.check_library.mode_dependence import mode_dependent_parts
from framework.check_library.model_checks import unmarked_cause
from framework.check_library.probe import ProbeLimit, ProbeSession, in_place_updates_undone, model_copy, unseen, why_not
from framework.check_library.schedule_trace import schedule_problem
from framework.core.events import Event
from framework.core.measurements import (
    CHANCE_LEVELS,
    CONTRACT_BREACHES,
    DIAGNOSE,
    LABEL_KEYS,
    LOSS_FLOORS,
    UPDATE_RATIO,
)
from framework.core.plugin import Plugin, on
from framework.core.state import RunState
from framework.core.step import run_step
from framework.datasets.loader import to_device
from framework.debug.mode_switch import evaluation_switch
from framework.debug.step_branch import evaluation_branch

CHECK = "diagnosis"

register(
    "debug_diagnose_symptoms",
    "bool",
    True,
    "When training shows a symptom (chance level, a loss not decreasing, dev at chance), rule causes in or out on "
    "copies and name one.",
    __name__,
)

# Train batches the data family reads, and those the two paths (training mode, evaluation) run.
DATA_BATCHES = 4
PATH_BATCHES = 4
# A loss within this fraction of its chance level learned nothing (as the learning watch judges it) ...
AT_CHANCE = 0.03
# ... and one this fraction below it learned (the learning watch's "train fell below it").
LEARNED = 0.1
# The experiment that tells a model or loss that cannot learn from data whose labels do not carry over.
SYNTHETIC_EXPERIMENT = (
    "rerun with ++debug_synthetic_data True (the same model and loss on synthetic data of the same shapes with a "
    "learnable relation): learns -> the model and the loss work, look at the data (python tools/dump-dataset.py "
    "CONFIG --batches 2 shows inputs with their labels); does not learn -> look at the model and the loss"
)


@dataclass
class Symptom:
    """What the learning watch saw: the warning's ``text`` (the facts), the loss, the learning rates applied
    over the run (in order), and whether the train loss fell (then fitting one batch tells nothing new)."""

    text: str
    loss: str
    applied_lr: list[float] = field(default_factory=list)
    train_learns: bool = False
    dev: str = ""  # the dataset at chance while train learns (for train_learns)


@dataclass
class Ruling:
    """One family's outcome: ``cause`` (a measurement rules the family in: why), ``ruled_out`` (why not), or
    ``observed`` (what the check saw that decides neither), with ``experiment``, the run that would decide."""

    family: str
    cause: str = ""
    ruled_out: str = ""
    observed: str = ""
    experiment: str = ""
    fix: str = ""  # what to do about ``cause``
    evidence: dict[str, Any] = field(default_factory=dict)
    where: dict[str, Any] = field(default_factory=dict)
    seconds: float = 0.0


class Diagnosis(Plugin):
    """Fingerprints the parameters before the first step; offers ``diagnose`` to the symptom watchers."""

    provides = (DIAGNOSE,)
    needs = (CHANCE_LEVELS, CONTRACT_BREACHES, LABEL_KEYS, LOSS_FLOORS, UPDATE_RATIO)

    def __init__(self) -> None:
        self.start: torch.Tensor | None = None  # the parameters' fingerprint before the first update

    @classmethod
    def from_config(cls, config: Config, state: RunState) -> Diagnosis | None:
        return cls() if config.bool("debug_diagnose_symptoms") else None

    @on(Event.STEP_START, once=True)
    def record_start(self, state: RunState) -> None:
        self.start = fingerprint(state.model)
        state.store.put(DIAGNOSE, self.diagnose, by=self)

    def diagnose(self, state: RunState, symptom: Symptom) -> Finding | None:
        """Run the ladder for ``symptom`` and report one finding (in the symptom's words, with the cause or what
        is not decided yet). Returns it (None: no batch to run on, nothing reported)."""
        began = time.process_time()
        batch = _train_batch(state)
        if batch is None:
            return None
        rulings: list[Ruling] = []
        mapped: list[DependencyMap | str] = []  # the dependency map (or why it could not be made), made once

        def mapping() -> DependencyMap | str:
            if not mapped:
                mapped.append(_dependency_map(state, batch))
            return mapped[0]

        ladder: list[Callable[[], Ruling]] = [
            lambda: _contracts(state),
            lambda: _schedule(state, symptom),
            lambda: _data(state, mapping()),
            lambda: _reads_input(mapping()),
        ]
        if not symptom.train_learns:
            ladder.append(lambda: _can_learn(state, batch, self.start))
        else:
            ladder.append(lambda: _two_paths(state, symptom))
        for rung in ladder:
            started = time.process_time()
            ruling = rung()
            ruling.seconds = time.process_time() - started
            rulings.append(ruling)
            if ruling.cause:
                break
        seconds = time.process_time() - began
        found = report(_finding(state, symptom, rulings, seconds))
        log.v4(f"Diagnosis of {symptom.loss!r}: {len(rulings)} check(s) in {seconds:.2f} s of CPU time.")
        return found


def _train_batches(state: RunState, count: int) -> list[tuple[Any, dict[str, Any]]]:
    """The first ``count`` batches of this epoch's train plan as the dataset gives them ([(indices, arrays)]).

    The epoch's own plan (kept by the loader), so that reading them changes nothing the run reads next."""
    loader = state.loaders.get("train")
    if loader is None:
        return []
    epoch = max(state.epoch, 1)
    return [(indices, loader.numpy_batch(indices, epoch)) for indices in loader.plan(epoch)[:count]]


def _train_batch(state: RunState) -> dict[str, torch.Tensor] | None:
    """The first train batch of this epoch, on the device (the same batch for every family)."""
    loader = state.loaders.get("train")
    epoch = max(state.epoch, 1)
    plan = loader.plan(epoch) if loader is not None else []
    return to_device(loader.tensor_batch(plan[0], epoch), state.device) if plan else state.batch


def _contracts(state: RunState) -> Ruling:
    breaches = state.store.get(CONTRACT_BREACHES) or []
    ruling = Ruling("the losses get what their contracts expect", evidence={"breaches": list(breaches)})
    if breaches:
        ruling.cause = f"the first step found that a loss does not get what it expects: {breaches[0]}"
        ruling.fix = "Give the loss the input its contract expects, as the first step's sanity check says."
    else:
        ruling.ruled_out = "the losses get the inputs their contracts expect (first step)"
    return ruling


def _schedule(state: RunState, symptom: Symptom) -> Ruling:
    problem, evidence = schedule_problem(symptom.applied_lr, state.learning_rate, state.store.get(UPDATE_RATIO))
    ruling = Ruling("the optimizer and schedule do what was meant", evidence=evidence)
    if problem:
        ruling.cause = problem
        ruling.fix = "Correct the learning rate or its schedule so that the optimizer applies the rate meant."
    elif symptom.applied_lr:
        ruling.ruled_out = f"the applied learning rate reached {max(symptom.applied_lr):g}"
    return ruling


def _data(state: RunState, mapping: DependencyMap | str) -> Ruling:
    """The dataset's keys over a few train batches, and what the model's first layer gets of them."""
    ruling = Ruling("the data carries information")
    infos = []
    batches = _train_batches(state, DATA_BATCHES)
    if batches:
        infos = data_information(state.extern_data, batches, set(state.store.get(LABEL_KEYS) or ()))
        ruling.evidence = {info.key: info.evidence for info in infos}
    problems = [info for info in infos if info.problem]
    first = mapping.first_input if isinstance(mapping, DependencyMap) else None
    if problems:
        ruling.cause = problems[0].problem
        ruling.where = {"key": problems[0].key}
        ruling.fix = f"Repair the data of key {problems[0].key!r} in the data pipeline."
    elif first is not None and first[0] < NEARLY_CONSTANT * first[1]:
        spread, scale = first
        ruling.evidence["first layer input"] = {"function": mapping.first_layer, "spread": spread, "scale": scale}
        ruling.cause = (
            f"what the model's first layer ({mapping.first_layer}) gets is nearly constant across the batch: it "
            f"varies by {spread:.3g} (standard deviation across entries) at a scale of {scale:.3g}, while the "
            f"dataset's keys vary; so the step's preprocessing erases the differences (inputs scaled or normalised "
            f"twice, Normalize with the statistics of another scale, every token looked up as the same id)"
        )
        ruling.where = {"function": mapping.first_layer}
        ruling.fix = "Preprocess the inputs once, with the statistics of their own scale."
    elif infos:
        ruling.ruled_out = f"the inputs vary ({', '.join(repr(i.key) for i in infos)} over {DATA_BATCHES} batches)"
    return ruling


def _dependency_map(state: RunState, batch: dict[str, torch.Tensor]) -> DependencyMap | str:
    """The dependency map of the model copy's predictions on ``batch`` (eval mode), or why it could not be made."""
    keys = [k for k in batch if not k.endswith(":seq_len") and k in state.extern_data]
    tokens = [k for k in keys if not batch[k].is_floating_point() and batch[k].dim() == 2]
    floats = [k for k in keys if batch[k].is_floating_point()]
    session = ProbeSession(state)

    def run(changed: dict[str, torch.Tensor], watch: Any) -> None:
        with session.isolated(CHECK) as model, watch:
            session.changed_run(CHECK, model, changed)

    try:
        return dependency_map(run, batch, tokens, floats)
    except ProbeLimit as exc:
        return str(exc)


def _reads_input(found: DependencyMap | str) -> Ruling:
    ruling = Ruling("the model reads its input")
    if isinstance(found, str):
        ruling.evidence = {"could not run": found}
        return ruling
    if not found.keys:
        ruling.evidence = {"not measured": "no loss input or no input key found on the graph"}
        return ruling
    ruling.evidence = {
        d.key: {"real": round(d.real, 3), "padding": round(d.padding, 3), "other sequences": round(d.other, 3)}
        for d in found.keys
    }
    inverted = [d for d in found.keys if d.reads_padding_not_input()]
    if inverted:
        d = inverted[0]
        ruling.where = {"key": d.key}
        ruling.cause = (
            f"the predictions (the input of {found.loss}) depend on the padding of {d.key!r}, not on its real "
            f"frames: of the gradient of {found.probes} probed predictions, {d.padding:.1%} reaches the "
            f"{d.padded_frames} padded frames and {d.beside_peak:.1%} the real ones (of the padded sequences) besides each "
            f"prediction's own position (or first token). A mask with the opposite convention does this "
            f"(transformers' attention_mask is 1 at the tokens to attend; torch's key_padding_mask and a "
            f"masked_fill mask are True at the positions to hide), and so does a final state read after the padding"
        )
        ruling.fix = (
            "Give the mask the convention its consumer expects (inverted), or read the final state at each "
            "sequence's length."
        )
    elif all(d.total == 0 for d in found.keys):
        names = ", ".join(repr(d.key) for d in found.keys)
        ruling.cause = (
            f"no prediction (the input of {found.loss}) depends on the input ({names}): the gradient from the "
            f"predictions to every input position is 0 (an input detached, zeroed, or replaced before the model "
            f"reads it)"
        )
        ruling.where = {"keys": [d.key for d in found.keys]}
        ruling.fix = "Feed the input to the model without detaching, zeroing or replacing it."
    else:
        read = [d for d in found.keys if d.total > 0]
        ruling.ruled_out = (
            "the predictions read the real input ("
            + ", ".join(f"{d.key!r}: {d.real:.0%} of the gradient on its real frames" for d in read)
            + ")"
        )
    return ruling


def _can_learn(state: RunState, batch: dict[str, torch.Tensor], start: torch.Tensor | None) -> Ruling:
    ruling = Ruling("the model can learn")
    floors = state.store.get(LOSS_FLOORS) or {}
    floor = sum(floors.values()) if floors else 0.0

    def run(model: torch.nn.Module) -> Any:
        return run_step(state.config, model, batch, "train", epoch=max(state.epoch, 1), step=state.global_step)

    try:
        with unseen():
            fit = fit_one_batch(state.model, run, floor)
    except Exception as exc:  # a model that cannot be copied, or a step that fails on the copy: not decided
        ruling.evidence = {"could not run": why_not(exc)}
        return ruling
    same = identical_units(state.model)
    frozen = unchanged(state.model, start, fit.trained) if start is not None else []
    ruling.evidence = {
        "one-batch fit": f"{fit.losses[0]:.4g} -> {fit.losses[-1]:.4g} in {len(fit.losses)} Adam steps",
        "identical units": [f"{name} ({n} units)" for name, n in same],
        "never changed": frozen[:8],
    }
    if same:
        name, n = same[0]
        ruling.where = {"parameter": name}
        ruling.cause = (
            f"the {n} units of {name!r} have identical weights: they get identical gradients and never become "
            f"different (a constant initialisation does this; initialise randomly)"
        )
        ruling.fix = f"Initialise {name!r} randomly, not with a constant."
    elif frozen and (unmarked := unmarked_cause(state.optimizer, state.model, frozen, ruling.evidence)):
        ruling.where = {"parameters": frozen}
        ruling.cause = f"{len(frozen)} parameter(s) never changed since the first step{unmarked}"
        ruling.fix = (
            f"Mark the loss meant to train them with optimizer={ruling.evidence['optimizers'][0]!r}, or list them "
            f"in frozen_params."
        )
    elif frozen:
        ruling.where = {"parameter": frozen[0]}
        ruling.cause = (
            f"{len(frozen)} parameter(s) get gradients but never changed since the first step ({', '.join(frozen[:4])}"
            f"): the optimizer does not update them (not in its param groups, or a learning rate of 0 for them)"
        )
        ruling.fix = "Put them in the optimizer's param groups, with a learning rate above 0."
    elif not fit.fits and (modes := _fits_in_eval_mode(state.model, run, floor)) is not None:
        # The two fits differ only in the mode: what training mode switches on keeps the model from learning.
        ruling.where = {"modules": modes[1]}
        ruling.evidence["one-batch fit in eval mode"] = f"{modes[0].losses[0]:.4g} -> {min(modes[0].losses[-3:]):.4g}"
        ruling.cause = (
            f"a copy fits one batch in eval mode ({modes[0].losses[0]:.4g} -> {min(modes[0].losses[-3:]):.4g} in "
            f"{FIT_STEPS} Adam steps) but not in training mode ({fit.losses[0]:.4g} -> {fit.losses[-1]:.4g}), and the "
            f"mode is all that differs: what training mode switches on keeps the model from learning. The parts that "
            f"compute differently in training mode: {', '.join(modes[1])}"
            + (
                " (torch's dropout p is the probability of dropping; TensorFlow's keep_prob, the probability of keeping, "
                "passed as p drops most activations)"
                if any(re.search(r"\(p=0\.[5-9]|\(p=1\)", part) for part in modes[1])
                else ""
            )
        )
        ruling.fix = "Weaken or remove what training mode switches on in these parts (dropout p is the share dropped)."
    elif not fit.fits:
        # Observed, not a cause: the fit's optimizer and rate may not suit this model (a warmup it needs, batch
        # statistics of one batch), so a model that trains well elsewhere can fail this fit too.
        ruling.observed = (
            f"a copy of the model did not fit one batch with the check's own optimizer: its loss went "
            f"{fit.losses[0]:.4g} -> {fit.losses[-1]:.4g} in {len(fit.losses)} Adam steps (learning rate "
            f"{FIT_LEARNING_RATE:g}), which does not tell the model or the loss from an optimizer that does not suit it"
        )
        ruling.experiment = (
            "rerun with ++debug_overfit_batches 1 (the run's own optimizer and learning rate on one batch, "
            "debug_overfit_steps steps): does not learn -> look at the model and the loss; learns -> "
            + SYNTHETIC_EXPERIMENT
        )
    else:
        ruling.ruled_out = (
            f"a copy fits one batch ({fit.losses[0]:.4g} -> {min(fit.losses[-3:]):.4g} in {FIT_STEPS} Adam steps)"
        )
    return ruling


def _fits_in_eval_mode(
    model: torch.nn.Module, run: Callable[[torch.nn.Module], Any], floor: float
) -> tuple[Fit, list[str]] | None:
    """(the eval-mode fit, the parts that depend on the mode) when the model has such parts and a copy in eval mode
    fits the batch the training-mode copy did not; None otherwise (or when the fit cannot run)."""
    parts = mode_dependent_parts(model, limit=4)
    if not parts:
        return None
    try:
        with unseen():
            fit = fit_one_batch(model, run, floor, train=False)
    except Exception:  # noqa: BLE001 - not decided: the training-mode fit's observation stands
        return None
    return (fit, parts) if fit.fits else None


def train_batch_losses(state: RunState, loss: str, batches: list[tuple[Any, Any]] | None = None) -> dict[str, float]:
    """The mean of ``loss`` over the first ``PATH_BATCHES`` train batches (or ``batches``) of this epoch, on a copy of
    the model, in training mode ("train") and evaluated as dev is ("eval": eval mode, no gradient): RETURNN's
    ``devtrain``. Raises what copying the model or running the step raises."""
    batches = _train_batches(state, PATH_BATCHES) if batches is None else batches
    loader = state.loaders["train"]
    epoch = max(state.epoch, 1)
    losses: dict[str, list[float]] = {"train": [], "eval": []}
    with unseen(), torch.no_grad(), in_place_updates_undone(state.model) as left:
        copy = model_copy(state.model)
        for indices, _ in batches:
            batch = to_device(loader.tensor_batch(indices, epoch), state.device)
            for stage in ("train", "eval"):
                copy.train(stage == "train")
                run_ctx = run_step(state.config, copy, batch, stage, epoch=epoch, step=state.global_step)
                losses[stage].append(float(run_ctx.losses[loss].normalized()))
    if left:
        log.v5(f"The diagnosis's run of train_step changed parameter {left[0]!r} in place (not undone).")
    return {stage: sum(values) / len(values) for stage, values in losses.items() if values}


def _two_paths(state: RunState, symptom: Symptom) -> Ruling:
    """The same train batches through training mode and the way dev is evaluated (eval mode, no gradient), on a
    copy: RETURNN's ``devtrain``. A train loss that fell while dev stays at chance is memorization only if the
    evaluation path on the training data fell too; if it sits at chance there, the gap is between the paths."""
    ruling = Ruling("training mode and evaluation agree on the training data")
    level = (state.store.get(CHANCE_LEVELS) or {}).get(symptom.loss)
    batches = _train_batches(state, PATH_BATCHES)
    if level is None or not batches:
        ruling.evidence = {"not measured": "no chance level of the loss, or no train batches"}
        return ruling
    try:
        means = train_batch_losses(state, symptom.loss, batches)
    except Exception as exc:  # a model that cannot be copied, a step that fails on the copy: not decided
        ruling.evidence = {"could not run": why_not(exc)}
        return ruling
    trained, evaluated = means["train"], means["eval"]
    ruling.evidence = {"batches": len(batches), "train mode": trained, "evaluated": evaluated, "chance": level.value}
    facts = (
        f"the same {len(batches)} train batches give {symptom.loss} {trained:.4g} in training mode and "
        f"{evaluated:.4g} evaluated as dev is (eval mode, no gradient), against a chance level of {level.value:.4g}"
    )
    if evaluated >= level.value * (1 - AT_CHANCE) and trained < level.value * (1 - LEARNED):
        ruling.where = {"path": "evaluation"}
        ruling.cause = (
            f"{facts}: the model learned the training data, and the evaluation path loses it on the same data, so "
            f"the gap is between the paths, not between train and {symptom.dev or 'dev'} data (a module that "
            f"acts otherwise in eval mode: batch-norm running statistics, an eval-only branch, a step that "
            f"reads run_ctx.train_flag)"
        )
        ruling.fix = (
            "Make the evaluation path compute as training mode does (batch-norm running statistics, eval-only "
            "branches, run_ctx.train_flag)."
        )
        # where the paths part: each mode-dependent module class in turn in training mode inside the evaluation
        switched = evaluation_switch(state, symptom.loss)
        if switched is not None:
            ruling.cause += f"; {switched.text(symptom.loss, symptom.dev or 'dev')}".rstrip(".")
            ruling.where = {"path": "evaluation", "module": switched.modules[0]}
            ruling.evidence |= {"module_class": switched.cls, "switched": switched.switched}
            if switched.never_updated:  # the configuration names the cause: one record with the learning watch's
                ruling.fix = switched.fix
                ruling.evidence["problem"] = switched.problem
        # or the step's own branch for evaluation (run_ctx.train_flag False), with what it gives the model
        branch = evaluation_branch(state, symptom.loss) if switched is None else None
        if branch is not None:
            ruling.cause += f"; {branch.text(symptom.loss, symptom.dev or 'dev')}"
            ruling.where = {"path": "evaluation (run_ctx.train_flag False)"}
            ruling.evidence |= {"train_flag_true_in_eval_mode": branch.flagged}
            if branch.moves_explain:  # the moves alone part the paths: one record with the learning watch's
                ruling.fix = branch.fix
                ruling.evidence["problem"] = branch.problem
    elif evaluated < level.value * (1 - AT_CHANCE):
        ruling.observed = (
            f"{facts}: the model fits the training data evaluated as dev is, and what it learned does not carry over "
            f"to {symptom.dev or 'dev'}"
        )
        ruling.experiment = (
            "evaluate a part of the training data held out of training (train on the rest; eval_datasets = "
            "{'heldout': ...}): at chance there too -> the training labels do not belong to their inputs (inputs "
            "and labels shuffled separately, misaligned files); learned there -> dev differs from train (compare "
            "python tools/dump-dataset.py CONFIG --dataset dev --batches 2 with the train batches)"
        )
    else:
        ruling.observed = facts
    return ruling


def _finding(state: RunState, symptom: Symptom, rulings: list[Ruling], seconds: float) -> Finding:
    """The one finding: the symptom, the cause that a measurement ruled in, else what is not decided yet: what was
    observed, what was ruled out, and the next experiment; the evidence."""
    cause = next((r for r in rulings if r.cause), None)
    ruled_out = [r.ruled_out for r in rulings if r.ruled_out]
    evidence: dict[str, Any] = {r.family: r.evidence for r in rulings}
    evidence["seconds"] = {r.family: round(r.seconds, 3) for r in rulings} | {"all": round(seconds, 3)}
    if cause is not None and "problem" in cause.evidence:  # the key that merges another check's record of it
        evidence["problem"] = cause.evidence["problem"]
    if cause is not None:
        message = f"{symptom.text}. Cause: {cause.cause}."
        if ruled_out:
            message += f" (Ruled out first: {'; '.join(ruled_out)}.)"
    else:
        observed = [r.observed for r in rulings if r.observed]
        undecided = [r.family for r in rulings if not (r.cause or r.ruled_out or r.observed)]
        experiment = next((r.experiment for r in rulings if r.experiment), SYNTHETIC_EXPERIMENT)
        fix = f"Run the next experiment: {experiment}."
        message = (
            f"{symptom.text}. Not decided yet: "
            + (f"observed {'; '.join(observed)}; " if observed else "")
            + f"ruled out {'; '.join(ruled_out) or 'nothing'}"
            + (f"; could not check: {', '.join(undecided)}" if undecided else "")
            + f". Next experiment: {experiment}."
        )
    return Finding(
        "warning",
        "learning watch",
        message,
        evidence=evidence,
        where=cause.where if cause is not None else {},
        fix=cause.fix if cause is not None else fix,
        epoch=state.epoch,
        step=state.global_step,
        option="debug_diagnose_symptoms = False",
    )


PLUGINS = (Diagnosis,)
