"""Which modules make the evaluation path score the training data worse? The experiment that decides it.

A symptom asks for it: at the end of epoch 1 the first train batches score far worse evaluated as dev is (eval mode,
no gradient) than in training mode (``learning_watch``). On the trained model, every module class in turn runs its
own forward in training mode inside that evaluation (a copy, its buffers restored after each run), everything else as
before; the classes tried are those that compute differently by mode (``mode_dependence.differs_by_mode``: dropout,
normalisation with running statistics, spectral norm, user code that reads ``self.training``). The class whose switch
closes most of the gap is where the paths part. That alone says where, not that it is unintended (free-running
decoding, EMA weights or an eval-only branch are choices); for normalisation layers the configuration can say more:
running statistics still at their initial values after an epoch of training, with a momentum of 0, are never updated.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from framework.check_library.mode_dependence import differs_by_mode
from framework.core.state import RunState
from framework.core.step import run_step
from framework.debug.symptom_runs import buffers_restored, first_train_batch, once_per_step

CLOSES = 0.5  # a switch that closes at least this share of the gap between the paths explains it


@dataclass
class Switched:
    """The module class whose training-mode forward inside the evaluation closes the gap, with the losses."""

    cls: str
    modules: list[str]
    evaluated: float  # the evaluation path as it is
    switched: float  # ... with those modules in training mode
    trained: float  # the training path (training mode)
    stale: list[str]  # normalisation modules whose running statistics are still their initial values
    momentum: float | None  # their momentum, when they share one

    @property
    def never_updated(self) -> bool:
        """Whether the configuration contradicts itself: normalisation that evaluates with statistics training never
        updated. Only then is the switch a cause; otherwise it says where the paths part."""
        return bool(self.stale)

    @property
    def problem(self) -> str:
        """The problem key (``evidence["problem"]``) shared by the checks that run this experiment."""
        return f"the eval-mode behaviour of {self.cls}"

    @property
    def fix(self) -> str:
        """What to do about it."""
        if self.momentum == 0 and self.stale:
            return "A non-zero momentum (torch's default 0.1), so that training updates the running statistics."
        return (
            f"Make the {self.cls} modules compute in eval mode what training optimised (for normalisation: running "
            f"statistics that describe the data)."
        )

    @property
    def closed(self) -> float:
        """The share of the gap between the paths that the switch closes."""
        return (self.evaluated - self.switched) / max(self.evaluated - self.trained, 1e-12)

    def text(self, loss: str, dataset: str) -> str:
        """What the experiment showed, and the cause where the configuration names it."""
        shown = ", ".join(repr(m) for m in self.modules[:3]) + (", ..." if len(self.modules) > 3 else "")
        said = (
            f"the paths part in the eval-mode behaviour of the {len(self.modules)} {self.cls} module(s) ({shown}): "
            f"with only their own forward in training mode, {loss} on the first train batch is {self.switched:.4g} "
            f"instead of {self.evaluated:.4g} when evaluated as {dataset} is (training mode: {self.trained:.4g}; "
            f"{self.closed:.0%} of the gap closed)"
        )
        if not self.stale:
            return said + "."
        initial = (
            f"{len(self.stale)} of them still hold their initial running statistics (running_mean 0, running_var 1) "
            f"after training"
        )
        if self.momentum == 0:
            return (
                f"{said}. {initial}: their momentum is 0, so the running mean and variance are never updated, and "
                f"evaluation normalises with statistics that do not describe the data."
            )
        return f"{said}. {initial}: evaluation normalises with statistics that do not describe the data."


def _stale(module: nn.Module) -> bool:
    """Whether a normalisation module with running statistics still holds their initial values."""
    mean, var = getattr(module, "running_mean", None), getattr(module, "running_var", None)
    if not isinstance(mean, torch.Tensor) or not isinstance(var, torch.Tensor) or mean.numel() == 0:
        return False
    return bool((mean == 0).all()) and bool((var == 1).all())


def evaluation_switch(state: RunState, loss: str) -> Switched | None:
    """On the first train batch of this epoch: the module class whose forward in training mode, inside the
    evaluation path, closes at least ``CLOSES`` of the gap to the training path (the class that closes most); None
    when none does, or when the experiment cannot run (a model that cannot be copied, a step that fails on the copy).
    Run once per step and loss, however many checks ask."""
    return once_per_step("mode switch", state, loss, lambda: _experiment(state, loss))


def _experiment(state: RunState, loss: str) -> Switched | None:
    """``evaluation_switch``'s experiment; raises what copying the model or running the step raises."""
    with first_train_batch(state) as setting:
        if setting is None:
            return None
        copy, batch, epoch = setting

        def score(stage: str, switch: type | None = None) -> float:
            copy.train(stage == "train")
            if switch is not None:
                for module in copy.modules():
                    if type(module) is switch:
                        module.training = True  # its own forward only, not its children's
            with buffers_restored(copy):
                run_ctx = run_step(state.config, copy, batch, stage, epoch=epoch, step=state.global_step)
            return float(run_ctx.losses[loss].normalized())

        evaluated = score("eval")
        trained = score("train")
        if not evaluated > trained:
            return None
        classes = list(dict.fromkeys(type(m) for m in copy.modules() if differs_by_mode(m)))
        best: tuple[float, type] | None = None
        for cls in classes:
            # a class that cannot run in training mode here (a batch norm given one sequence) is not the answer
            try:
                switched = score("eval", cls)
            except torch.cuda.OutOfMemoryError:
                raise
            except Exception:  # noqa: BLE001
                continue
            if evaluated - switched >= CLOSES * (evaluated - trained) and (best is None or switched < best[0]):
                best = switched, cls
    if best is None:
        return None
    switched, cls = best
    members = [(name or "the model", m) for name, m in state.model.named_modules() if type(m) is cls]
    stale = [(name, m) for name, m in members if _stale(m)]
    momenta = {getattr(m, "momentum", None) for _, m in stale}
    momentum = next(iter(momenta)) if len(momenta) == 1 else None
    return Switched(
        cls.__name__, [name for name, _ in members], evaluated, switched, trained, [name for name, _ in stale], momentum
    )
