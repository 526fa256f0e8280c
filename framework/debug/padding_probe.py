"""Does the loss read padded frames? (``debug_padding_check``, on by default.)

Before the first step, the step runs again (on a copy of the model, in eval mode: the probe
session of ``framework.inspection.probe``) with the padded frames of every variable-length key
changed at once (other class ids, or large values); when a loss moves, once more per key with
only that key's padded frames changed, to name it. A loss that changes while the model's outputs on the real frames
stay the same covers the padding: the frames beyond ``key:seq_len`` count in the loss. A change
of the outputs on the real frames means the model reads the padding (e.g. a convolution over
the zero padding, an RNN run over it without packing); that is often intended, so it is a note.
"""

from __future__ import annotations

from typing import Any

import torch

from framework import log
from framework.config import Config
from framework.core.events import Event, Order
from framework.core.measurements import PROBE_SESSION
from framework.core.plugin import Plugin, on
from framework.core.scores import step_losses
from framework.core.state import RunState
from framework.debug.sanity import ModelCheckError, report_findings
from framework.inspection.data_checks import Finding
from framework.inspection.probe import ProbeLimit, ProbeSession, padding_mask
from framework.inspection.tensors import floating_tensors
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


def _real_frames(t: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """The entries of a model output at the real frames of ``mask``'s key, if it has its [B, T] axes."""
    if t.dim() >= 2 and tuple(t.shape[:2]) == tuple(mask.shape):
        return t[~mask]
    return t


class PaddingProbe(Plugin):
    """Runs the padding probe on the first batch, before the first step."""

    order = Order.CHECK
    needs = (PROBE_SESSION,)
    after = ("LossInputsCheck",)  # whose watch must be on in the session's run of the unchanged batch

    @classmethod
    def from_config(cls, config: Config, state: RunState) -> PaddingProbe | None:
        return cls() if config.bool("debug_padding_check") else None

    @on(Event.STEP_START, once=True)
    def probe(self, state: RunState) -> None:
        session = state.store.get(PROBE_SESSION)
        masks = {k: m for k in state.extern_data if (m := padding_mask(state.batch, k)) is not None}
        if not masks or session is None:
            return
        try:
            findings = self._findings(state, session, masks)
        except ProbeLimit as exc:
            log.v5(f"Padding check skipped: the probe step failed ({exc}).")
            return
        report_findings(state, "first step", findings, ModelCheckError, False, off="debug_padding_check = False")

    def _findings(self, state: RunState, session: ProbeSession, masks: dict[str, torch.Tensor]) -> list[Finding]:
        covered, read = {}, {}  # key -> how the losses moved
        base = session.real_run(CHECK)
        base_losses = {n: v.detach() for n, v in step_losses(base.run_ctx, optimized_only=True).items()}
        base_outputs = base.outputs
        if len(masks) > 1:  # all keys' padding changed at once: a healthy model needs no run per key
            batch = state.batch
            for key, mask in masks.items():
                batch = perturbed(batch, key, mask, state.extern_data[key].sparse_dim)
            with session.isolated() as model, torch.no_grad():
                losses, _ = self._run(session, model, batch)
            if not any(n in base_losses and _changed(base_losses[n], v) for n, v in losses.items()):
                return []
        for key, mask in masks.items():
            batch = perturbed(state.batch, key, mask, state.extern_data[key].sparse_dim)
            with session.isolated() as model, torch.no_grad():
                losses, outputs = self._run(session, model, batch)
            moved = [n for n, v in losses.items() if n in base_losses and _changed(base_losses[n], v)]
            if not moved:
                continue
            same_outputs = len(outputs) == len(base_outputs) and not any(
                _changed(_real_frames(a, mask), _real_frames(b, mask))
                for a, b in zip(base_outputs, outputs, strict=True)
            )
            change = ", ".join(f"{n} {float(base_losses[n]):.5g} -> {float(losses[n]):.5g}" for n in moved)
            (covered if same_outputs else read)[key] = change
        return self._report(covered, read)

    @staticmethod
    def _report(covered: dict[str, str], read: dict[str, str]) -> list[Finding]:
        findings = []
        if covered:
            keys = " or ".join(repr(k) for k in covered)
            changes = "; ".join(f"{k}: {c}" for k, c in covered.items())
            first = next(iter(covered))
            findings.append(
                Finding(
                    "warning",
                    f"the loss covers padding: changing only the padded frames of {keys} (beyond the :seq_len "
                    f"lengths) changes the loss ({changes}) while the model's outputs on the real frames stay the "
                    f"same. The padded frames count as data (and dilute the mean). Mask them: e.g. mask = "
                    f"torch.arange(T)[None, :] < extern_data['{first}:seq_len'][:, None] (lengths are on the CPU: "
                    f".to(logits.device) the mask), then compute the loss on "
                    f"the selected frames (logits[mask], targets[mask]) or give the padded targets ignore_index.",
                )
            )
        for key, change in read.items():
            findings.append(
                Finding(
                    "note",
                    f"the model's outputs on real frames depend on the padded frames of {key!r} (the loss moved: "
                    f"{change}): a convolution over the zero padding does this and is usually fine; an RNN run over "
                    f"the padding without pack_padded_sequence, or a mean over time without a mask, is a bug.",
                )
            )
        return findings

    @staticmethod
    def _run(
        session: ProbeSession, model: torch.nn.Module, batch: dict[str, torch.Tensor]
    ) -> tuple[dict[str, torch.Tensor], list[torch.Tensor]]:
        outputs: list[torch.Tensor] = []

        def keep(_module: Any, _args: Any, output: Any) -> None:
            outputs.extend(t.detach().clone() for t in floating_tensors(output))

        handle = model.register_forward_hook(keep)
        try:
            losses = step_losses(session.changed_run(CHECK, model, batch), optimized_only=True)
        finally:
            handle.remove()
        return losses, outputs


PLUGINS = (PaddingProbe,)
