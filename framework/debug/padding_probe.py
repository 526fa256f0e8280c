"""Does the loss read padded frames? (``debug_padding_check``, on by default.)

Before the first step, the step runs again (on a copy of the model, in eval mode: the probe
session of ``framework.inspection.probe``) with the padded frames of every variable-length key
changed at once (other class ids, or large values); when a loss moves, once more per key with
only that key's padded frames changed, to name it. A loss that changes while the model's outputs on the real frames
stay the same covers the padding: the frames beyond ``key:seq_len`` count in the loss. A change
of the outputs on the real frames means the model reads the padding (e.g. a convolution over
the zero padding, an RNN run over it without packing); that is often intended, so it is a note.
The outputs compared are what the model returns (tensors, tuples, dicts, a Hugging Face
``ModelOutput``): per-position outputs at the real frames (batch- or time-major, or flattened),
per-sequence outputs whole, and never a loss the model returns (``ModelOutput.loss``, a 0-dim
tensor): a GPT-2 given ``labels=input_ids`` with padding counts the padding in that loss.
"""

from __future__ import annotations

from typing import Any

import torch

from framework import log
from framework.config import Config
from framework.core.events import Event, Order
from framework.core.measurements import IGNORED_LABELS
from framework.core.plugin import Plugin, on
from framework.core.scores import step_losses
from framework.core.state import RunState
from framework.debug.sanity import report_findings
from framework.errors import ModelCheckError
from framework.findings import Finding
from framework.inspection.probe import PROBE_SESSION, ProbeLimit, ProbeSession, padding_mask
from framework.inspection.tensors import named_tensors
from framework.options import register

register(
    "debug_padding_check",
    "bool",
    True,
    "Before the first step: rerun it with the padded frames of each variable-length key changed; warn if a loss moves.",
    __name__,
)

TOLERANCE = 1e-5
CHECK = "padding check"


def perturbed(batch: dict[str, torch.Tensor], key: str, mask: torch.Tensor, sparse_dim: int | None) -> dict:
    """A copy of ``batch`` whose ``key`` differs from the original at the padded frames only."""
    values = batch[key].clone()
    generator = torch.Generator(device="cpu").manual_seed(0)
    shape = values[mask].shape
    if sparse_dim is not None:
        other = torch.randint(1, max(sparse_dim, 2), shape, generator=generator)
        replacement = (values[mask].cpu() + other) % max(sparse_dim, 2)
    elif values.is_floating_point():
        valid = values[~mask].float()
        scale = 1.0 + 3.0 * (float(valid.std()) if valid.numel() > 1 else 1.0)
        replacement = torch.randn(shape, generator=generator) * scale + scale
    else:
        replacement = values[mask].cpu() + 1
    values[mask] = replacement.to(values.dtype).to(values.device)
    return {**batch, key: values}


def _changed(a: torch.Tensor, b: torch.Tensor) -> bool:
    if a.shape != b.shape:
        return True
    a, b = a.double(), b.double()
    return not bool(torch.allclose(a, b, rtol=TOLERANCE, atol=TOLERANCE, equal_nan=True))


def _real_frames(t: torch.Tensor, mask: torch.Tensor) -> torch.Tensor | None:
    """What of one model output must stay the same when only the padding of ``mask``'s key changes.

    A per-position output (logits [B, T, V], time-major [T, B, F], flattened [B*T, V], attention
    [B, H, T, T]) at the real frames; a per-sequence output ([B, C]) whole; None for an output that
    is not per sequence (no batch axis, e.g. a loss or a statistic over the batch).
    """
    batch, time = mask.shape
    if t.dim() == 0:
        return None
    axes = [i for i, n in enumerate(t.shape) if n == batch]
    if not axes and t.shape[0] == batch * time:
        t, axes = t.reshape(batch, time, *t.shape[1:]), [0]
    if not axes:
        return None
    time_axis = next((i for i, n in enumerate(t.shape) if n == time and i != axes[0]), None)
    if time_axis is None:
        return t
    return t.movedim((axes[0], time_axis), (0, 1))[~mask]


def _is_loss(name: str) -> bool:
    """An output the model names as a loss (a Hugging Face ModelOutput's ``loss``, ``aux_loss``...)."""
    return any("loss" in part.lower() for part in name.split("."))


def _same_outputs(
    base: list[tuple[str, torch.Tensor]], changed: list[tuple[str, torch.Tensor]], mask: torch.Tensor
) -> bool | None:
    """Whether the model's outputs stayed the same on the real frames (None: it returns nothing to compare).

    A loss the model returns (0-dim, or named like one) is left out: it is what the check judges,
    not an output of the model on the frames.
    """
    if len(base) != len(changed):
        return False
    compared = 0
    for (name, a), (_, b) in zip(base, changed, strict=True):
        if _is_loss(name):
            continue
        if a.shape != b.shape:
            return False
        real_a, real_b = _real_frames(a, mask), _real_frames(b, mask)
        if real_a is None or real_b is None:
            continue
        compared += 1
        if _changed(real_a, real_b):
            return False
    return True if compared else None


class PaddingProbe(Plugin):
    """Runs the padding probe on the first batch, before the first step."""

    first_step_check = ("debug_padding_check",)

    order = Order.CHECK
    needs = (PROBE_SESSION, IGNORED_LABELS)

    @classmethod
    def from_config(cls, config: Config, state: RunState) -> PaddingProbe | None:
        return cls() if config.bool("debug_padding_check") else None

    @on(Event.STEP_START, once=True)
    def probe(self, state: RunState) -> None:
        session = state.store.get(PROBE_SESSION)
        masks = {k: m for k in state.extern_data if (m := padding_mask(state.batch, k)) is not None}
        # Labels padded with the ignore_index of the loss over them are excluded from it already: changing their
        # padding would only break that exclusion (and an ignore_index that is also a class is named as such).
        ignored = state.store.get(IGNORED_LABELS) or {}
        masks = {k: m for k, m in masks.items() if not (k in ignored and bool((state.batch[k][m] == ignored[k]).all()))}
        if not masks or session is None:
            return
        try:
            findings = self._findings(state, session, masks)
        except ProbeLimit as exc:
            log.v5(f"Padding check skipped: the probe step failed ({exc}).")
            return
        report_findings(state, "first step", findings, ModelCheckError, False, off="debug_padding_check = False")

    def _findings(self, state: RunState, session: ProbeSession, masks: dict[str, torch.Tensor]) -> list[Finding]:
        covered, read, unknown = {}, {}, {}  # key -> how the losses moved
        # Its own run of the unchanged batch in eval mode: in training mode, dropout and batch statistics
        # (batch norm over the padded frames) would move the outputs whatever the padding holds.
        base_losses, base_outputs = self._run(session, state.batch)
        if len(masks) > 1:  # all keys' padding changed at once: a healthy model needs no run per key
            batch = state.batch
            for key, mask in masks.items():
                batch = perturbed(batch, key, mask, state.extern_data[key].sparse_dim)
            losses, _ = self._run(session, batch)
            if not any(n in base_losses and _changed(base_losses[n], v) for n, v in losses.items()):
                return []
        for key, mask in masks.items():
            batch = perturbed(state.batch, key, mask, state.extern_data[key].sparse_dim)
            losses, outputs = self._run(session, batch)
            moved = [n for n, v in losses.items() if n in base_losses and _changed(base_losses[n], v)]
            if not moved:
                continue
            same_outputs = _same_outputs(base_outputs, outputs, mask)
            change = ", ".join(f"{n} {float(base_losses[n]):.5g} -> {float(losses[n]):.5g}" for n in moved)
            {True: covered, False: read, None: unknown}[same_outputs][key] = change
        return self._report(covered, read, unknown)

    @staticmethod
    def _report(covered: dict[str, str], read: dict[str, str], unknown: dict[str, str]) -> list[Finding]:
        findings = []
        if covered:
            keys = " or ".join(repr(k) for k in covered)
            changes = "; ".join(f"{k}: {c}" for k, c in covered.items())
            first = next(iter(covered))
            findings.append(
                Finding(
                    "warning",
                    "sanity check",
                    f"the loss covers padding: changing only the padded frames of {keys} (beyond the :seq_len "
                    f"lengths) changes the loss ({changes}) while the model's outputs on the real frames stay the "
                    f"same. The padded frames count as data (and dilute the mean). Mask them: e.g. mask = "
                    f"torch.arange(T)[None, :] < extern_data['{first}:seq_len'][:, None] (lengths are on the CPU: "
                    f".to(logits.device) the mask), then compute the loss on "
                    f"the selected frames (logits[mask], targets[mask]) or give the padded targets ignore_index (-100 in a "
                    f"Hugging Face model's labels).",
                )
            )
        for key, change in read.items():
            findings.append(
                Finding(
                    "note",
                    "sanity check",
                    f"the model's outputs on real frames depend on the padded frames of {key!r} (the loss moved: "
                    f"{change}): a convolution over the zero padding does this and is usually fine; an RNN run over "
                    f"the padding without pack_padded_sequence, or a mean over time without a mask, is a bug.",
                )
            )
        for key, change in unknown.items():
            findings.append(
                Finding(
                    "note",
                    "sanity check",
                    f"padding check undecided for {key!r}: changing only its padded frames moves the loss ({change}), "
                    f"but the model returns no per-frame or per-sequence output (only a loss), so the check cannot "
                    f"tell a loss that covers padding from a model that reads it. Return the logits too to let it "
                    f"decide.",
                )
            )
        return findings

    @staticmethod
    def _run(
        session: ProbeSession, batch: dict[str, torch.Tensor]
    ) -> tuple[dict[str, torch.Tensor], list[tuple[str, torch.Tensor]]]:
        """The losses and the model's named floating-point outputs of one eval-mode run on a fresh copy."""
        outputs: list[tuple[str, torch.Tensor]] = []  # (name in the output, e.g. 'logits'; the tensor)

        def keep(_module: Any, _args: Any, output: Any) -> None:
            outputs.extend((n, t.detach().clone()) for n, t in named_tensors(output) if t.is_floating_point())

        with session.isolated(CHECK) as model, torch.no_grad():
            handle = model.register_forward_hook(keep)
            try:
                losses = step_losses(session.changed_run(CHECK, model, batch), optimized_only=True)
            finally:
                handle.remove()
        return losses, outputs


PLUGINS = (PaddingProbe,)
