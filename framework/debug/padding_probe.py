"""Does the loss read padded frames? (``debug_padding_check``, on by default.)

Before the first step, the step runs again (on a copy of the model, in eval mode: the probe
session of ``framework.check_library.probe``) with the padded frames of every variable-length key
changed at once (other class ids, or large values); when a loss moves, once more per key with
only that key's padded frames changed, to name it. A loss that changes while the model's outputs on the real frames
stay the same covers the padding: the frames beyond ``key:seq_len`` count in the loss. A change
of the outputs on the real frames means the model reads the padding (e.g. a convolution over
the zero padding, an RNN run over it without packing). Which of the two decides whether a sequence's result
depends on its batch-mates, so that key runs once more with more padding after every sequence (as a longer
batch-mate brings, padded as the data is): outputs on the real frames that change then, with a loss that moves
by more than 0.1%, are a warning naming where the padding enters (the first module whose outputs on the real
frames change); outputs that stay (a convolution over zero padding reads the same zeros whatever follows), or
move while the loss barely does (a bidirectional RNN over zero padding, a widespread choice), a note.
The outputs compared are what the model returns (tensors, tuples, dicts, a Hugging Face
``ModelOutput``): per-position outputs at the real frames (batch- or time-major, or flattened),
per-sequence outputs whole, and never a loss the model returns (``ModelOutput.loss``, a 0-dim
tensor): a GPT-2 given ``labels=input_ids`` with padding counts the padding in that loss.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from framework.base import log
from framework.base.config import Config
from framework.base.errors import ModelCheckError
from framework.base.findings import Finding
from framework.base.options import register
from framework.check_library.probe import (
    PROBE_SESSION,
    ProbeLimit,
    ProbeSession,
    padding_mask,
)
from framework.check_library.tensors import named_tensors
from framework.core.events import Event, Order
from framework.core.measurements import IGNORED_LABELS
from framework.core.plugin import Plugin, on
from framework.core.scores import step_losses
from framework.core.state import RunState
from framework.core.step import run_step
from framework.debug.sanity import report_findings
from framework.debug.symptom_runs import first_train_batch

register(
    "debug_padding_check",
    "bool",
    True,
    "Before the first step: rerun it with the padded frames of each variable-length key changed; warn if a loss moves.",
    __name__,
)

TOLERANCE = 1e-5
CHECK = "padding check"
# Outputs on the real frames that move by more than this fraction of their largest magnitude with more padding
# after them depend on it (a differently shaped batch may round a little differently: not that).
MORE_PADDING_TOLERANCE = 1e-3
READS_PADDING = 0.05  # a loss that moves by this share when padding is added depends on the batch-mates' lengths
# A dependence on the amount of padding is a warning when it reaches more than this share of the real frames (a
# mean or an attention over time reaches all of them); a local operator that reads the padding at a sequence's end
# only (a convolution over padded embeddings) reaches a few frames at the edges, a widespread choice.
PERVASIVE = 0.5


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


def more_padding(
    batch: dict[str, torch.Tensor], key: str, frames: int | None = None
) -> tuple[dict[str, torch.Tensor], int]:
    """A copy of ``batch`` whose variable-length keys padded along with ``key`` (the same batch and time size) get
    as many padded frames again after their frames (or ``frames``), each with the value its padding already holds (0
    where it has none); how many frames were added. The real frames and the lengths stay as they are."""
    batch_size, time = batch[key].shape[:2]
    added = time if frames is None else frames
    extended = dict(batch)
    for name, values in batch.items():
        mask = padding_mask(batch, name)
        if mask is None or values.shape[:2] != (batch_size, time):
            continue
        fill = values[mask][0] if bool(mask.any()) else torch.zeros((), dtype=values.dtype, device=values.device)
        tail = fill.expand(batch_size, added, *values.shape[2:]).to(values.dtype)
        extended[name] = torch.cat([values, tail], dim=1)
    return extended, added


def longer_batches(batch: dict[str, torch.Tensor], key: str) -> list[tuple[dict[str, torch.Tensor], int]]:
    """``more_padding`` in the sizes to try, in order: as many frames again, then an eighth as many (a model with a
    fixed number of positions, such as BERT's 512, takes a little more padding but not double)."""
    return [more_padding(batch, key, frames) for frames in (None, max(1, batch[key].shape[1] // 8))]


def _largest_move(
    base: list[tuple[str, torch.Tensor]],
    mask: torch.Tensor,
    moved: list[tuple[str, torch.Tensor]],
    moved_mask: torch.Tensor,
) -> tuple[str, float, float, float] | None:
    """(output name, largest change, largest magnitude, share of its real frames (or sequences) that moved, whether
    it is one result per sequence) of the model's output whose real frames moved most between ``base`` (padding
    ``mask``) and ``moved`` (``moved_mask``), beyond MORE_PADDING_TOLERANCE; None: none moved (losses and outputs that
    are not per sequence, or whose real frames have other shapes, are not compared)."""
    worst = None
    for (name, a), (_, b) in zip(base, moved, strict=False):
        real_a, real_b = _real_frames(a, mask), _real_frames(b, moved_mask)
        if _is_loss(name) or real_a is None or real_b is None or real_a.shape != real_b.shape or not real_a.numel():
            continue
        rows = (real_a.double() - real_b.double()).abs().reshape(real_a.shape[0], -1).amax(1)
        change, scale = float(rows.max()), max(float(real_a.double().abs().max()), 1e-12)
        if change > MORE_PADDING_TOLERANCE * scale and (worst is None or change / scale > worst[1] / worst[2]):
            share = float((rows > MORE_PADDING_TOLERANCE * scale).double().mean())
            worst = (name, change, scale, share, real_a is a)  # the whole output: it has no time axis
    return worst


def _comparable(
    base: list[tuple[str, torch.Tensor]],
    mask: torch.Tensor,
    moved: list[tuple[str, torch.Tensor]],
    moved_mask: torch.Tensor,
) -> bool:
    """Whether ``_largest_move`` compares at least one of the model's outputs between the two runs."""
    for (name, a), (_, b) in zip(base, moved, strict=False):
        real_a, real_b = _real_frames(a, mask), _real_frames(b, moved_mask)
        if not _is_loss(name) and real_a is not None and real_b is not None and real_a.shape == real_b.shape:
            return True
    return False


@dataclass
class MorePadding:
    """What as many padded frames again after the real ones did: ``added`` frames; the model's ``output`` whose real
    frames moved most, by ``change`` (of values up to ``scale``), on a ``share`` of its real frames (of its sequences
    when it is one result ``per_sequence``); the ``module`` where that starts (text, "" if not found); the losses
    before -> after (``loss_change``) and whether one moved by more than MORE_PADDING_TOLERANCE."""

    added: int
    output: str
    change: float
    scale: float
    share: float
    per_sequence: bool
    module: str = ""
    loss_change: str = ""
    loss_moves: bool = False


def _relative_change(a: torch.Tensor, b: torch.Tensor) -> float:
    """|b - a| / |a| of two loss values (inf when ``a`` is 0 and ``b`` is not)."""
    a, b = float(a), float(b)
    return abs(b - a) / abs(a) if a else (0.0 if b == 0 else float("inf"))


def _first_moved(
    base: list[tuple[str, torch.Tensor]],
    mask: torch.Tensor,
    moved: list[tuple[str, torch.Tensor]],
    moved_mask: torch.Tensor,
) -> str:
    """Where the padding enters, from two traces (``(name (Type), tensor)`` in the order the modules ran): between
    the last module whose per-frame outputs on the real frames stayed the same and the first whose moved ("'lstm'
    (LSTM): the first module ... (those of 'embed' (Embedding) before it do not)"); "" when none moved or the traces
    do not line up."""
    if len(base) != len(moved):
        return ""
    unchanged = ""
    for (name, a), (_, b) in zip(base, moved, strict=True):
        if a.dim() < 2 or a.shape[:1] != b.shape[:1] or a.shape[1:2] != mask.shape[1:2]:
            continue  # not per frame, batch-major (a final state, a per-sequence output): the per-frame ones tell
        if _largest_move([("", a)], mask, [("", b)], moved_mask) is not None:
            return f"{name}: the first module, in the order they run, whose outputs on the real frames change" + (
                f" (those of {unchanged} before it do not)" if unchanged else ""
            )
        unchanged = name
    return ""


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


def evaluation_reads_padding(state: RunState, loss: str) -> tuple[str, int, float, float] | None:
    """The trained model's evaluation path against more padding (a symptom's experiment: dev scores worse through
    that path than training mode does on the same data). On a copy in eval mode, the first train batch as it is and
    with more padding after every sequence of each variable-length key, through the evaluation path (run_ctx.train_flag
    False) and through the training path: (key, frames added, loss, loss with the padding) on the evaluation path for
    the first key whose padding moves ``loss`` there by more than READS_PADDING while it moves it on the training path
    by at most a fifth as much (the paths differ in reading the padding); None when none does. Raises what copying the
    model or running the step raises."""
    with first_train_batch(state) as setting:
        if setting is None:
            return None
        copy, batch, epoch = setting
        copy.eval()

        def moves(before: dict[str, torch.Tensor], after: dict[str, torch.Tensor]) -> tuple[float, float, float]:
            """(eval loss before, after, the training path's relative move over the eval path's)."""
            losses = {
                stage: [
                    float(
                        run_step(state.config, copy, b, stage, epoch=epoch, step=state.global_step)
                        .losses[loss]
                        .normalized()
                    )
                    for b in (before, after)
                ]
                for stage in ("eval", "train")
            }
            (e0, e1), (t0, t1) = losses["eval"], losses["train"]
            relative = abs(e1 - e0) / max(abs(e0), 1e-12)
            return e0, e1, (abs(t1 - t0) / max(abs(t0), 1e-12)) / max(relative, 1e-12)

        for key in [k for k in batch if (m := padding_mask(batch, k)) is not None and bool(m.any())]:
            # (frames added, the batch with and without the extra padding)
            runs = [(added, extended, batch) for extended, added in longer_batches(batch, key)]
            if (shorter := _shorter_sequences(batch, key)) is not None:  # ... that takes no more: less padding
                padded, cropped, removed = shorter
                runs.append((removed, padded, cropped))
            for added, padded, plain in runs:
                try:
                    before, after, train_share = moves(plain, padded)
                except Exception:  # noqa: BLE001 - too long for the model: the next way
                    continue
                if abs(after - before) > READS_PADDING * max(abs(before), 1e-12) and train_share <= 0.2:
                    return key, added, before, after
                break
    return None


def _shorter_sequences(
    batch: dict[str, torch.Tensor], key: str
) -> tuple[dict[str, torch.Tensor], dict[str, torch.Tensor], int] | None:
    """The sequences of ``batch`` shorter than its longest (by ``key``), as padded as in the batch and with the padding
    that only the longest needed removed (each key padded along with ``key`` cut to their longest); how many frames
    that removes. None when fewer than two sequences are shorter."""
    lengths = batch[key + ":seq_len"]
    size, time = batch[key].shape[:2]
    rows = torch.nonzero(lengths < time).flatten()
    if len(rows) < 2:
        return None
    padded = {k: t[rows.to(t.device)] if t.dim() and t.shape[0] == size else t for k, t in batch.items()}
    cropped = dict(padded)
    for name, values in padded.items():  # each padded key cut to its own longest sequence among these
        if name + ":seq_len" in padded and values.dim() > 1:
            cropped[name] = values[:, : int(padded[name + ":seq_len"].max())]
    return padded, cropped, time - int(lengths[rows].max())


class PaddingProbe(Plugin):
    """Runs the padding probe on the first batch, before the first step."""

    bug_check = ("debug_padding_check",)

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
                return self._report({}, {}, {}, {}, self._counted_padding(state, session, masks, set()))
        for key, mask in masks.items():
            batch = perturbed(state.batch, key, mask, state.extern_data[key].sparse_dim)
            losses, outputs = self._run(session, batch)
            moved = [n for n, v in losses.items() if n in base_losses and _changed(base_losses[n], v)]
            if not moved:
                continue
            same_outputs = _same_outputs(base_outputs, outputs, mask)
            change = ", ".join(f"{n} {float(base_losses[n]):.5g} -> {float(losses[n]):.5g}" for n in moved)
            {True: covered, False: read, None: unknown}[same_outputs][key] = change
        # key -> how more padding after its frames moved the outputs (None: the run with more padding failed)
        depends: dict[str, MorePadding | None] = {}
        base_trace: list[tuple[str, torch.Tensor]] = []
        for key in read:
            trace: list[tuple[str, torch.Tensor]] = []
            try:
                extended, added, losses, outputs = self._longer(session, state.batch, key, trace)
                if not base_trace:
                    self._run(session, state.batch, base_trace)
            except ProbeLimit as exc:  # a step that needs its keys' sizes to agree otherwise: not decided
                log.v5(f"Padding check: the run with more padding after {key!r} failed ({exc}).")
                depends[key] = None
                continue
            extended_mask = padding_mask(extended, key)
            moved = _largest_move(base_outputs, masks[key], outputs, extended_mask)
            if moved is not None:
                shared = [n for n in losses if n in base_losses]
                depends[key] = MorePadding(
                    added,
                    *moved,
                    module=_first_moved(base_trace, masks[key], trace, extended_mask),
                    loss_change=", ".join(f"{n} {float(base_losses[n]):.5g} -> {float(losses[n]):.5g}" for n in shared),
                    loss_moves=any(
                        _relative_change(base_losses[n], losses[n]) > MORE_PADDING_TOLERANCE for n in shared
                    ),
                )
        counted = self._counted_padding(state, session, masks, set(read) | set(unknown))
        return self._report(covered, read, unknown, depends, counted)

    def _counted_padding(
        self, state: RunState, session: ProbeSession, masks: dict[str, torch.Tensor], reading: set[str]
    ) -> dict[str, tuple[int, dict[str, tuple[float, float]]]]:
        """Key -> (frames added, score -> (before, after)): the scores that change when as many padded frames again
        follow every sequence of that key's group (the keys padded alike), while the model's outputs on the real
        frames stay the same, so that only the padded frames can have moved them. A group whose padded values the
        model reads (or whose outputs cannot be compared) is the business of the runs above."""
        counted: dict[str, tuple[int, dict[str, tuple[float, float]]]] = {}
        base_scores: dict[str, torch.Tensor] = {}
        base_outputs: list[tuple[str, torch.Tensor]] = []
        groups = set()
        for key, mask in masks.items():
            group = tuple(state.batch[key].shape[:2])
            if group in groups:
                continue
            groups.add(group)
            if any(tuple(state.batch[k].shape[:2]) == group for k in reading):
                continue
            extended, added = more_padding(state.batch, key)
            scores: dict[str, torch.Tensor] = {}
            try:
                if not base_scores:
                    _, base_outputs = self._run(session, state.batch, scores=base_scores)
                _, outputs = self._run(session, extended, scores=scores, optional=True)
            except ProbeLimit as exc:  # a model that needs a fixed length: not decided
                log.v5(f"Padding check: the run with more padding after {key!r} failed ({exc}).")
                continue
            extended_mask = padding_mask(extended, key)
            if not _comparable(base_outputs, mask, outputs, extended_mask):
                continue
            if _largest_move(base_outputs, mask, outputs, extended_mask) is not None:
                continue
            moved = {
                name: (float(base_scores[name]), float(value))
                for name, value in scores.items()
                if name in base_scores and _relative_change(base_scores[name], value) > MORE_PADDING_TOLERANCE
            }
            if moved:
                counted[key] = (added, moved)
        return counted

    @staticmethod
    def _report(
        covered: dict[str, str],
        read: dict[str, str],
        unknown: dict[str, str],
        depends: dict[str, MorePadding | None],
        counted: dict[str, tuple[int, dict[str, tuple[float, float]]]],
    ) -> list[Finding]:
        findings = []
        for key, (added, moved) in counted.items():
            names = ", ".join(repr(n) for n in moved)
            changes = ", ".join(f"{n} {a:.5g} -> {b:.5g}" for n, (a, b) in moved.items())
            findings.append(
                Finding(
                    "warning",
                    "sanity check",
                    f"{names} count{'s' if len(moved) == 1 else ''} the padded frames: with {added} more padded frames "
                    f"after the real frames of every sequence of {key!r} (as a longer batch-mate brings, padded as the "
                    f"data is), {changes}, while the model's outputs on the real frames stay the same. A score of the "
                    f"real frames does not change with the padding after them; this one is averaged over (or "
                    f"counts) padded positions, so it depends on the batch-mates' lengths.",
                    evidence={
                        "added_frames": added,
                        "scores": {n: {"before": a, "after": b} for n, (a, b) in moved.items()},
                    },
                    where={"key": key, "scores": list(moved)},
                    fix=f"Compute it over the real frames only: mask = torch.arange(T)[None, :] < "
                    f"extern_data['{key}:seq_len'][:, None] (on the device of the scores), then e.g. "
                    f"wrong[mask].float().mean(), or divide a sum by mask.sum() instead of by every position.",
                )
            )
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
                    evidence={"loss_changes": covered},
                    where={"keys": list(covered)},
                    fix=f"Mask the padded frames: compute the loss on the real frames of {keys} only (a mask from "
                    f"{first + ':seq_len'!r}), or give the padded targets ignore_index (-100).",
                )
            )
        for key, moved in depends.items():
            if moved is None:
                continue
            what = f"output {moved.output!r}" if moved.output else "output"
            enters = f"at {moved.module}" if moved.module else "before that output"
            observed = (
                f"with {moved.added} more padded frames after the real frames of {key!r} (as a longer sequence in the "
                f"batch brings, padded as the data is), the model's {what} changes on the real frames by up to "
                f"{moved.change:.3g} (its values reach {moved.scale:.3g}), on {moved.share:.0%} of its real frames (the "
                f"padding enters {enters})"
            )
            # One result per sequence that moves is that sequence's whole result; the share of frames that moved tells
            # a local operator at the edges from a global one only for per-frame outputs.
            if moved.loss_moves and (moved.share > PERVASIVE or moved.per_sequence):
                findings.append(
                    Finding(
                        "warning",
                        "sanity check",
                        f"a sequence's result depends on its batch-mates: {observed}, and the loss with it "
                        f"({moved.loss_change}; other padding values: {read[key]}). A mean or an attention over time "
                        f"without a mask does this, and so does an RNN run over the padding without "
                        f"pack_padded_sequence. Mask the padded frames (pass a mask from {key + ':seq_len'!r}, or pack "
                        f"the sequences).",
                        evidence={
                            "added_padding": moved.added,
                            "change": moved.change,
                            "scale": moved.scale,
                            "share": moved.share,
                            "loss_change": moved.loss_change,
                        },
                        where={"key": key, "output": moved.output, "module": moved.module},
                        fix=f"Mask the padded frames (pass a mask from {key + ':seq_len'!r}), or pack the sequences.",
                    )
                )
            else:
                findings.append(
                    Finding(
                        "note",
                        "sanity check",
                        f"the model's outputs depend on how much padding follows a sequence: {observed}; the loss: "
                        f"{moved.loss_change}. At most {PERVASIVE:.0%} of the frames moved (a convolution "
                        f"reading the padding at a sequence's end) or the loss by less than "
                        f"{MORE_PADDING_TOLERANCE:.1%} (a bidirectional RNN over zero padding): widespread choices. "
                        f"Mask or pack the sequences to make each result independent of its batch-mates.",
                        evidence={
                            "added_padding": moved.added,
                            "change": moved.change,
                            "scale": moved.scale,
                            "share": moved.share,
                            "loss_change": moved.loss_change,
                        },
                        where={"key": key, "output": moved.output, "module": moved.module},
                    )
                )
        for key, change in read.items():
            if key in depends and depends[key] is not None:
                continue
            amount = (
                "; whether they depend on how much padding follows (on the batch-mates) is not decided: the run "
                "with more padding failed"
                if key in depends
                else ", but not on how many follow (as many again, padded as the data is, change nothing)"
            )
            findings.append(
                Finding(
                    "note",
                    "sanity check",
                    f"the model's outputs on real frames depend on the values of the padded frames of {key!r} (the loss "
                    f"moved: {change}){amount}: a convolution over the zero padding does this, and the data pads the "
                    f"same way at every step.",
                    evidence={"loss_change": change},
                    where={"key": key},
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
                    evidence={"loss_change": change},
                    where={"key": key},
                )
            )
        return findings

    def _longer(
        self, session: ProbeSession, batch: dict[str, torch.Tensor], key: str, trace: list[tuple[str, torch.Tensor]]
    ) -> tuple[dict[str, torch.Tensor], int, dict[str, torch.Tensor], list[tuple[str, torch.Tensor]]]:
        """The run with more padded frames after ``key``'s frames: the first of ``longer_batches`` the model takes."""
        (extended, added), (fewer, fewer_added) = longer_batches(batch, key)
        try:
            return extended, added, *self._run(session, extended, trace, optional=True)
        except ProbeLimit:
            trace.clear()
            return fewer, fewer_added, *self._run(session, fewer, trace)

    @staticmethod
    def _run(
        session: ProbeSession,
        batch: dict[str, torch.Tensor],
        trace: list[tuple[str, torch.Tensor]] | None = None,
        scores: dict[str, torch.Tensor] | None = None,
        optional: bool = False,
    ) -> tuple[dict[str, torch.Tensor], list[tuple[str, torch.Tensor]]]:
        """The losses and the model's named floating-point outputs of one eval-mode run on a fresh copy; with
        ``trace``, every submodule's floating-point outputs are appended to it in the order the modules run, each
        named ``name (Type)``; with ``scores``, every marked score (the errors too) is put in it. ``optional``: as in
        ``ProbeSession.changed_run``."""
        outputs: list[tuple[str, torch.Tensor]] = []  # (name in the output, e.g. 'logits'; the tensor)

        def keep(_module: Any, _args: Any, output: Any) -> None:
            outputs.extend((n, t.detach().clone()) for n, t in named_tensors(output) if t.is_floating_point())

        def follow(name: str) -> Any:
            def hook(module: Any, _args: Any, output: Any) -> None:
                floats = [t.detach().clone() for _, t in named_tensors(output) if t.is_floating_point()]
                trace.extend((f"{name!r} ({type(module).__name__})", t) for t in floats)

            return hook

        with session.isolated(CHECK) as model, torch.no_grad():
            handles = [model.register_forward_hook(keep)]
            if trace is not None:
                handles += [m.register_forward_hook(follow(n)) for n, m in model.named_modules() if n]
            try:
                run_ctx = session.changed_run(CHECK, model, batch, optional=optional)
                losses = step_losses(run_ctx, optimized_only=True)
                if scores is not None:
                    scores.update(step_losses(run_ctx))
            finally:
                for handle in handles:
                    handle.remove()
        return losses, outputs


PLUGINS = (PaddingProbe,)
