"""Is the accumulated gradient the gradient of the whole window? (``debug_accumulation_check``, on by default.)

With ``accum_grad_multiple_step > 1``, before the first update, the first window's batches run
again on a copy of the model in eval mode (deterministic: no dropout): each batch on its own,
and all of them merged into one batch (variable-length keys padded to the longest). The window's
gradient must be the engine's weighted sum of the batches' gradients. When it is not, the weights
that do reproduce it are found by least squares over the batches' gradients and named: e.g. a
loss that is a mean over each batch's own number of frames, which the engine (which knows
sequences, not frames) weights by sequences, so frames of short batches count more. When the
batches cannot be merged without changing the outputs (a convolution over padding, batch
statistics), each batch is judged on its own instead: the weight each row (frame, token) of its
class loss has in the batch's loss is the gradient of the batch's loss at that row's scores over
the row's own loss gradient there; a batch whose rows all weigh 1/n (a mean over its own n rows)
while the engine weights the batch by its share of sequences gives rows of different batches
different weights in the window, which is named the same way.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch.overrides import TorchFunctionMode

from framework.base import log
from framework.base.config import Config
from framework.base.findings import Finding, report
from framework.base.options import register
from framework.check_library.probe import ProbeLimit, ProbeSession
from framework.core.accumulation import loss_weights
from framework.core.events import Event, Order
from framework.core.plugin import Plugin, on
from framework.core.state import RunState

CHECK = "accumulation check"

register(
    "debug_accumulation_check",
    "bool",
    True,
    "With accum_grad_multiple_step > 1: check on the first window that the accumulated gradient is that of one "
    "batch holding the window, and name the normalization that differs.",
    __name__,
)

SAMPLED = 1 << 20  # gradient entries compared (a fixed sample for bigger models)
EXPLAINED = 1e-3  # relative residual below which the window's gradient is a weighted sum of the batches'
MATERIAL = 0.1  # relative difference of a batch's weight that matters


def merge_batches(batches: list[dict[str, torch.Tensor]]) -> dict[str, torch.Tensor] | None:
    """One batch holding the sequences of ``batches`` (variable-length keys padded with zeros), None if impossible."""
    merged = {}
    for key in batches[0]:
        parts = [b[key] for b in batches]
        if key.endswith(":seq_len") or key + ":seq_len" not in batches[0]:
            if any(p.shape[1:] != parts[0].shape[1:] for p in parts):
                return None
            merged[key] = torch.cat(parts)
            continue
        length = max(p.shape[1] for p in parts)
        padded = [torch.nn.functional.pad(p, (0, 0) * (p.dim() - 2) + (0, length - p.shape[1])) for p in parts]
        merged[key] = torch.cat(padded)
    return merged


class _Gradients:
    """The model's gradients as one vector: every entry, or every k-th of each parameter for big models."""

    def __init__(self, model: torch.nn.Module):
        self.params = [p for p in model.parameters() if p.requires_grad]
        self.stride = max(1, sum(p.numel() for p in self.params) // SAMPLED)
        for p in self.params:  # the real step's gradients (the probe session puts them back afterwards)
            p.grad = None

    def take(self) -> torch.Tensor:
        """The current gradients (zeros where none), then cleared."""
        parts = [
            (p.grad if p.grad is not None else torch.zeros_like(p)).flatten()[:: self.stride].double().cpu()
            for p in self.params
        ]
        for p in self.params:
            p.grad = None
        return torch.cat(parts)


def _candidates(batches: list[dict[str, torch.Tensor]], sizes: list[int]) -> dict[str, np.ndarray]:
    """Weightings a loss's normalization may imply, by what they are."""
    found = {"its share of the window's sequences": np.array(sizes) / sum(sizes)}
    for key in batches[0]:
        if key.endswith(":seq_len"):
            frames = np.array([float(b[key].sum()) for b in batches])
            if frames.sum() > 0:
                found[f"its share of the window's frames of {key[: -len(':seq_len')]!r}"] = frames / frames.sum()
    found["1 each (the batches' losses added)"] = np.ones(len(batches))
    found[f"1/{len(batches)} each (the batches' losses averaged)"] = np.full(len(batches), 1 / len(batches))
    return found


def _describe(weights: np.ndarray, candidates: dict[str, np.ndarray]) -> str:
    text = ", ".join(f"{w:.3g}" for w in weights)
    for what, values in candidates.items():
        if np.abs(weights - values).max() <= 0.02 * np.abs(values).max():
            return f"{what} ({text})"
    return f"({text})"


class _FirstClassLoss(TorchFunctionMode):
    """Records the first cross_entropy / nll_loss call: its function, scores, target and other keywords."""

    def __init__(self) -> None:
        super().__init__()
        self.call: tuple | None = None

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        if self.call is None and func in (F.cross_entropy, F.nll_loss) and len(args) >= 2:
            scores, target = args[0], args[1]
            if isinstance(scores, torch.Tensor) and scores.requires_grad:
                rest = {k: v for k, v in kwargs.items() if k not in ("reduction", "size_average", "reduce")}
                self.call = (func, scores, target, rest)
        return out


def _as_rows(t: torch.Tensor) -> torch.Tensor:
    """Class scores as [rows, classes] (cross_entropy's class axis is 1: [N, C] or [B, C, d1, ...])."""
    return t.movedim(1, -1).reshape(-1, t.shape[1]) if t.dim() > 1 else t.reshape(-1, 1)


def _as_rows(t: torch.Tensor) -> torch.Tensor:
    """Class scores as [rows, classes] (cross_entropy's class axis is 1: [N, C] or [B, C, d1, ...])."""
    return t.movedim(1, -1).reshape(-1, t.shape[1]) if t.dim() > 1 else t.reshape(-1, 1)


def row_weights(total: torch.Tensor, call: tuple) -> torch.Tensor | None:
    """The weight of each row of a class loss's scores in ``total`` (rows with no gradient of their own left
    out; None: no row has one). A row's weight is d total / d scores at the row, projected on the gradient of
    the row's own loss."""
    func, scores, target, rest = call
    (outer,) = torch.autograd.grad(total, scores, retain_graph=True, allow_unused=True)
    if outer is None:
        return None
    leaf = scores.detach().requires_grad_()
    with torch.enable_grad():
        (own,) = torch.autograd.grad(func(leaf, target, reduction="none", **rest).sum(), leaf)
    outer, own = _as_rows(outer).double(), _as_rows(own).double()
    norms = (own * own).sum(1)
    kept = norms > 0
    return (outer[kept] * own[kept]).sum(1) / norms[kept] if bool(kept.any()) else None


class AccumulationCheck(Plugin):
    """Keeps the first window's batches and compares its accumulated gradient with the merged batch's."""

    bug_check = ("debug_accumulation_check",)

    order = Order.CHECK

    def __init__(self, accum: int):
        self.accum = accum
        self.batches: list[tuple[dict[str, torch.Tensor], int]] = []  # the first window's, until judged

    @classmethod
    def from_config(cls, config: Config, state: RunState) -> AccumulationCheck | None:
        accum = config.int("accum_grad_multiple_step")
        return cls(accum) if config.bool("debug_accumulation_check") and accum > 1 else None

    @on(Event.STEP_START)
    def keep(self, state: RunState) -> None:
        self.batches.append((state.batch, len(state.batch_indices)))

    @on(Event.BEFORE_OPTIMIZER_STEP)
    def judge(self, state: RunState) -> None:
        batches, self.batches = self.batches, []
        self.callbacks.off(Event.STEP_START, self.keep)  # judged once: no cost on later steps
        self.callbacks.off(Event.BEFORE_OPTIMIZER_STEP, self.judge)
        if len(batches) < 2:
            return
        session = ProbeSession(state)
        try:
            found = self._compare(state, session, [b for b, _ in batches], [n for _, n in batches])
        except ProbeLimit as exc:
            log.v5(f"Accumulation check skipped: {exc}.")
            return
        if found:
            text, evidence, losses = found
            report(
                Finding(
                    "warning",
                    "accumulation check",
                    f"{text} (debug_accumulation_check = False turns this check off.)",
                    evidence={
                        "batches": len(batches),
                        "accum_grad_multiple_step": self.accum,
                        "sequences": [n for _, n in batches],
                        **evidence,
                    },
                    where={"losses": losses, "window": 1},
                    fix="Mark the loss per frame (reduction='none') or as a sum with use_normalized_loss=False.",
                    option="debug_accumulation_check = False",
                )
            )

    def _compare(
        self, state: RunState, session: ProbeSession, batches: list[dict[str, torch.Tensor]], sizes: list[int]
    ) -> tuple[str, dict[str, Any], list[str]] | None:
        """The finding's text, its numbers and the losses, when the window's gradient is not one batch's."""
        merged = merge_batches(batches)
        if merged is None:
            return self._by_rows(session, batches, sizes, "the window's batches cannot be merged into one")
        with session.isolated(CHECK) as model, torch.enable_grad():
            grads = _Gradients(model)
            each, engine = [], []
            for batch, size in zip(batches, sizes, strict=True):
                run_ctx = session.changed_run(CHECK, model, batch)
                weights = set(loss_weights(run_ctx, size / sum(sizes)).values())
                if len(weights) != 1:
                    log.v5("Accumulation check skipped: the window's losses are weighted differently (sums and means).")
                    return None
                run_ctx.total_loss().backward()
                each.append(grads.take())
                engine.append(weights.pop())
            session.changed_run(CHECK, model, merged).total_loss().backward()
            whole = grads.take()
            losses = [name for name, marked in run_ctx.losses.items() if not marked.as_error]
        basis = torch.stack(each, dim=1)
        solution = torch.linalg.lstsq(basis, whole.unsqueeze(1)).solution.squeeze(1)
        residual = float((basis @ solution - whole).norm() / whole.norm().clamp_min(1e-30))
        fitted, used = solution.numpy(), np.array(engine)
        if residual > EXPLAINED:
            why = f"the merged batch's gradient is no weighted sum of its batches' (residual {residual:.2g})"
            return self._by_rows(session, batches, sizes, why)
        if np.abs(fitted - used).max() <= MATERIAL * np.abs(used).max():
            return None
        candidates = _candidates(batches, sizes)
        numbers = {"fitted_weights": fitted.tolist(), "engine_weights": used.tolist(), "residual": residual}
        return (
            f"the accumulated gradient of the first window ({len(batches)} batches, accum_grad_multiple_step = "
            f"{self.accum}) is not the gradient of one batch holding the same {sum(sizes)} sequences: that weights "
            f"each batch by {_describe(fitted, candidates)}, the engine by {_describe(used, candidates)}. The loss "
            f"({', '.join(losses)}) is normalized within each batch by something other than the engine weights by "
            f"(e.g. a mean over each batch's own number of frames or tokens), so some frames count more than others. "
            f"Mark the loss per frame (reduction='none') or as a sum with use_normalized_loss=False: the engine then "
            f"adds the batches' sums, which is exactly the window's.",
            numbers,
            losses,
        )

    def _by_rows(
        self, session: ProbeSession, batches: list[dict[str, torch.Tensor]], sizes: list[int], why: str
    ) -> tuple[str, dict[str, Any], list[str]] | None:
        """Judge each batch on its own (``why``: the merged batch cannot tell): a class loss that is a mean over
        each batch's own rows, weighted by the engine with the batch's share of sequences."""
        per_row, counts = [], []
        with session.isolated(CHECK) as model, torch.enable_grad():
            for batch, size in zip(batches, sizes, strict=True):
                watch = _FirstClassLoss()
                with watch:
                    run_ctx = session.changed_run(CHECK, model, batch)
                weights = loss_weights(run_ctx, size / sum(sizes))
                if watch.call is None or len(weights) != 1:
                    log.v5(f"Accumulation check skipped: {why}, and no single class loss to judge by rows.")
                    return None
                rows = row_weights(run_ctx.total_loss(), watch.call)
                if rows is None or float(rows.max() - rows.min()) > 0.01 * float(rows.abs().max()):
                    log.v5(f"Accumulation check skipped: {why}, and the rows of a batch weigh differently.")
                    return None
                per_row.append(float(rows.mean()) * next(iter(weights.values())))
                counts.append(len(rows))
            losses = [name for name, marked in run_ctx.losses.items() if not marked.as_error]
        if max(per_row) <= (1 + MATERIAL) * min(per_row):
            return None
        heavy, light = int(np.argmax(per_row)), int(np.argmin(per_row))
        return (
            f"in the first window ({len(batches)} batches, accum_grad_multiple_step = {self.accum}), the loss "
            f"({', '.join(losses)}) is a mean over each batch's own rows ({', '.join(map(str, counts))} scored frames "
            f"or tokens), and the engine weights each batch by its share of the window's {sum(sizes)} sequences: a "
            f"frame of batch {heavy + 1} counts {per_row[heavy] / per_row[light]:.2f}x as much as one of batch "
            f"{light + 1}, where one batch holding the window would weigh them alike. (Judged batch by batch: {why}.) "
            f"Mark the loss per frame (reduction='none') or as a sum with use_normalized_loss=False: the engine then "
            f"adds the batches' sums, which is exactly the window's.",
            {"scored_rows": counts, "row_weights": per_row, "judged_by_rows": why},
            losses,
        )


PLUGINS = (AccumulationCheck,)
