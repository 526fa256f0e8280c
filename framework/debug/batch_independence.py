"""Do the sequences of a batch influence each other? (``debug_batch_independence``, on by default.)

Before the first step, the step runs once more in eval mode with gradients to the input: the
batch key itself when it is dense float data, else the output of the first module that the
data enters (an embedding). The gradient of one sequence's output with respect to the input of
the other sequences must be exactly zero; it is not when a reshape stands where a transpose was
meant, or a normalization runs over the batch axis. The module whose output first mixes
sequences is found by bisecting the modules in the order they finished (a few backward passes
on the first batch). Batch norm mixes sequences in training mode by design; eval mode leaves it
out, and a batch-norm module found as the culprit is not reported. Neither is mixing that changes
with the random state: the probe runs once more under other seeds, and when the sequences that
influence the first one are others then, the step draws its partners at random (mixup, cutmix,
in-batch sampling): an augmentation by design, where a bug (a view for a transpose, a statistic
over the batch axis) mixes the same sequences every time.
"""

from __future__ import annotations

import math
from typing import Any

import torch
from torch import nn

from framework.base import log
from framework.base.config import Config
from framework.base.errors import ModelCheckError
from framework.base.findings import Finding
from framework.base.options import register
from framework.base.rng import seed_everything
from framework.check_library.probe import PROBE_SESSION, ProbeLimit, ProbeSession
from framework.check_library.tensors import floating_tensors
from framework.core.events import Event, Order
from framework.core.plugin import Plugin, on
from framework.core.state import RunState
from framework.debug.sanity import report_findings

CHECK = "batch-independence check"

register(
    "debug_batch_independence",
    "bool",
    True,
    "Before the first step: check with a gradient probe that no sequence's output depends on another's input.",
    __name__,
)

# Gradients to other sequences below this fraction of the largest one to the sequence itself are rounding.
RELATIVE = 1e-6


def batch_axis(t: torch.Tensor, batch_size: int) -> int | None:
    """The one axis of size ``batch_size`` (None when there is none or more than one)."""
    axes = [i for i, n in enumerate(t.shape) if n == batch_size]
    return axes[0] if len(axes) == 1 else None


class _Probe:
    """One probe run: the input leaf and the model's module outputs in the order they finished."""

    def __init__(self, model: nn.Module, batch_size: int, leaf: torch.Tensor | None):
        self.model = model
        self.batch_size = batch_size
        self.leaf = leaf
        self.leaf_module: str | None = None
        # In the order they happened: (module path, module, "input"/"output", tensor, its batch axis).
        self.points: list[tuple[str, nn.Module, str, torch.Tensor, int]] = []
        self.names = {id(m): name or "(model)" for name, m in model.named_modules()}

    def hooks(self, module: nn.Module) -> list[Any]:
        """Hook ``module`` (of the probe's copy of the model); returns the handles."""
        return [
            module.register_forward_pre_hook(self.pre_hook, with_kwargs=True),
            module.register_forward_hook(self.hook),
        ]

    def pre_hook(self, module: nn.Module, args: Any, kwargs: dict[str, Any]) -> None:
        self._add_point(module, "input", (args, kwargs))  # Hugging Face modules take their inputs as keywords

    def hook(self, module: nn.Module, args: Any, output: Any) -> Any:
        name = self.names.get(id(module))
        first = output if isinstance(output, torch.Tensor) else next(iter(floating_tensors(output)), None)
        if name is None or first is None or not first.is_floating_point():
            return None
        if self.leaf is None:
            inputs_need_grad = any(t.requires_grad for t in floating_tensors(args))
            if (
                output is first
                and first.requires_grad
                and not inputs_need_grad
                and batch_axis(first, self.batch_size) is not None
            ):
                self.leaf = first.detach().requires_grad_()
                self.leaf_module = name
                return self.leaf
            return None
        self._add_point(module, "output", output)
        return None

    def _add_point(self, module: nn.Module, kind: str, value: Any) -> None:
        """The first tensor of ``value`` (tensor, tuple, dict, Hugging Face ``ModelOutput``) that has gradients
        and a batch axis: the logits of ``ModelOutput(loss, logits)``, not its loss."""
        name = self.names.get(id(module))
        if name is None or self.leaf is None:
            return
        for tensor in floating_tensors(value):
            axis = batch_axis(tensor, self.batch_size) if tensor.requires_grad else None
            if axis is not None:
                self.points.append((name, module, kind, tensor, axis))
                return

    def partners(self, index: int) -> list[int]:
        """The sequences whose input influences sequence 0's value at point ``index`` (its own left out)."""
        _, _, _, output, axis = self.points[index]
        row = output.select(axis, 0)
        weights = torch.randn(row.shape, generator=torch.Generator().manual_seed(0)).to(row.device, row.dtype)
        (grad,) = torch.autograd.grad((row * weights).sum(), self.leaf, retain_graph=True, allow_unused=True)
        if grad is None:
            return []
        leaf_axis = batch_axis(self.leaf, self.batch_size) or 0
        magnitudes = grad.abs().movedim(leaf_axis, 0).reshape(self.batch_size, -1).amax(dim=1).tolist()
        return [j for j in range(1, self.batch_size) if magnitudes[j] > RELATIVE * max(magnitudes[0], 1e-30)]

    def mixes(self, output: torch.Tensor, axis: int) -> float:
        """The largest gradient to another sequence's input, relative to the largest to the sequence's own.

        The first and the last sequence are probed: a view that interleaves sequences can leave
        the first one intact. NaN when a gradient is not finite: then nothing can be told.
        """
        ratios = []
        for index in (0, self.batch_size - 1):
            row = output.select(axis, index)
            weights = torch.randn(row.shape, generator=torch.Generator().manual_seed(index)).to(row.device, row.dtype)
            (grad,) = torch.autograd.grad((row * weights).sum(), self.leaf, retain_graph=True, allow_unused=True)
            if grad is None:
                return 0.0
            leaf_axis = batch_axis(self.leaf, self.batch_size) or 0
            magnitudes = grad.abs().movedim(leaf_axis, 0).reshape(self.batch_size, -1).amax(dim=1).tolist()
            if not all(math.isfinite(m) for m in magnitudes):
                return math.nan
            own = magnitudes.pop(index)
            other = max(magnitudes)
            ratios.append(other / own if own > 0 else (float("inf") if other > 0 else 0.0))
        return max(ratios)


def first_mixing(probe: _Probe) -> tuple[int, float] | None:
    """The index of the first point (in the order they happened) that depends on other sequences, and its ratio.

    Found by bisection: a few backward passes instead of one per module.
    """
    points = probe.points
    if not points:
        return None
    last = probe.mixes(points[-1][3], points[-1][4])
    if not last > RELATIVE:  # also NaN: a non-finite gradient says nothing about mixing (the numerics checks name it)
        return None
    low, high, ratio = 0, len(points) - 1, last  # points[high] mixes
    while low < high:
        middle = (low + high) // 2
        value = probe.mixes(points[middle][3], points[middle][4])
        if value > RELATIVE:
            high, ratio = middle, value
        else:
            low = middle + 1
    return high, ratio


def probe_size(batch: dict[str, torch.Tensor], model: nn.Module, batch_size: int) -> int:
    """A sub-batch size that no other axis of the batch or the parameters has, so the batch axis is unambiguous."""
    taken = {n for t in batch.values() for n in t.shape[1:]} | {n for p in model.parameters() for n in p.shape}
    return next((n for n in (13, 11, 7, 5, 3) if n <= batch_size and n not in taken), batch_size)


def _describe(point: tuple[str, nn.Module, str, torch.Tensor, int]) -> str:
    name, module, kind, _, _ = point
    return f"the {kind} of module {name!r} ({type(module).__name__})"


def _culprit(points: list, index: int) -> str:
    name, _, kind, _, _ = points[index]
    if kind == "input":
        if name == "(model)":
            return "in train_step, before the model is called"
        return f"in the code that calls {name!r} (the forward of {name.rpartition('.')[0] or '(model)'!r})"
    if index > 0 and points[index - 1][0] == name:
        return f"inside module {name!r}"
    before = f"after {_describe(points[index - 1])}, " if index > 0 else ""
    return f"{before}at or before the output of {name!r}"


class BatchIndependence(Plugin):
    """Runs the gradient probe on the first batch, before the first step."""

    bug_check = ("debug_batch_independence",)

    order = Order.CHECK
    needs = (PROBE_SESSION,)

    @classmethod
    def from_config(cls, config: Config, state: RunState) -> BatchIndependence | None:
        return cls() if config.bool("debug_batch_independence") else None

    @on(Event.STEP_START, once=True)
    def probe(self, state: RunState) -> None:
        session = state.store.get(PROBE_SESSION)
        batch_size = len(state.batch_indices)
        if batch_size < 2 or session is None:
            return
        size = probe_size(state.batch, state.model, batch_size)
        try:
            try:
                finding = self._run(state, session, {k: t[:size] for k, t in state.batch.items()}, size)
            except ProbeLimit:  # code that needs the real batch size (x.view(100, 784)): probe the whole batch
                if size == batch_size:
                    raise
                finding = self._run(state, session, dict(state.batch), batch_size)
        except ProbeLimit as exc:
            log.v5(f"Batch independence check skipped: the probe step failed ({exc}).")
            return
        if finding is not None:
            off = "debug_batch_independence = False"
            report_findings(state, "first step", [finding], ModelCheckError, False, off=off)

    def _run(
        self, state: RunState, session: ProbeSession, batch: dict[str, torch.Tensor], batch_size: int
    ) -> Finding | None:
        key = None
        for name, declared in state.extern_data.items():
            t = batch.get(name)
            if declared.sparse_dim is None and t is not None and t.is_floating_point():
                key, batch[name] = name, t.detach().clone().requires_grad_()
                break
        probe = self._probe(session, batch, batch_size, key)
        if probe.leaf is None:
            log.v5("Batch independence check skipped: no input entered the model with gradients.")
            return None
        found = first_mixing(probe)
        if found is None:
            return None
        index, ratio = found
        partners = probe.partners(index)
        for seed in (1, 2):  # other random states: a random pairing (mixup) differs under one of them at least
            again = self._probe(session, batch, batch_size, key, seed)
            if len(again.points) == len(probe.points) and again.partners(index) != partners:
                log.v5(
                    f"Batch independence: {_describe(probe.points[index])} mixes sequences that the step draws at "
                    f"random (others under another random state): a batch augmentation such as mixup, by design."
                )
                return None
        name, module, kind, _, _ = probe.points[index]
        if isinstance(module, nn.modules.batchnorm._BatchNorm) and kind == "output":
            return None
        source = f"batch key {key!r}" if key else f"the output of module {probe.leaf_module!r}"
        return Finding(
            "warning",
            "sanity check",
            f"sequences of a batch influence each other: {_describe(probe.points[index])} for one sequence depends "
            f"on the other sequences' inputs ({source}; gradient ratio {ratio:.3g}), although each sequence should "
            f"be computed on its own. The mixing happens {_culprit(probe.points, index)}. Typical causes: a "
            f"reshape/view used where a transpose/permute was meant (e.g. [B, T, F] viewed as [T, B, F]), or a "
            f"normalization, softmax or mean over the batch axis (dim 0) instead of the feature or time axis.",
            # the problem the batch-mates check finds too (another experiment): one record
            evidence={
                "problem": "sequences of a batch influence each other",
                "gradient_ratio": ratio,
                "influencing_sequences": len(partners),
            },
            where={"module": name, "module_class": type(module).__name__, "at": kind, **({"key": key} if key else {})},
            fix="Compute each sequence on its own: transpose/permute instead of reshape/view across the batch axis, "
            "and normalize, softmax or average over the feature or time axis, not dim 0.",
        )

    @staticmethod
    def _probe(
        session: ProbeSession, batch: dict[str, torch.Tensor], batch_size: int, key: str | None, seed: int | None = None
    ) -> _Probe:
        """One probe run on a copy of the model (under the random state ``seed`` when given)."""
        if key is not None:
            batch = {**batch, key: batch[key].detach().clone().requires_grad_()}
        with session.isolated(CHECK) as model, torch.enable_grad():
            if seed is not None:
                seed_everything(seed)  # the isolated block restores every generator afterwards
            probe = _Probe(model, batch_size, batch[key] if key else None)
            handles = [h for m in model.modules() for h in probe.hooks(m)]
            try:
                session.changed_run(CHECK, model, batch)
            finally:
                for handle in handles:
                    handle.remove()
        return probe


PLUGINS = (BatchIndependence,)
