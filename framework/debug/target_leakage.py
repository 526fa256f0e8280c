"""Is the answer inside the input? (``debug_target_leakage``, on by default.)

A language model's targets are its own input tokens at another position. Two silent bugs follow:
the prediction at position t reads the input position that holds its target (labels not
shifted; no causal mask, so attention or a bidirectional RNN reads the future), and the loss
learns to copy (dev loss near 0); or the targets sit further ahead than the model reads (labels
shifted twice, e.g. shifted by hand and again by a Hugging Face ``*ForCausalLM``), and the loss
stays far above what the model could reach.

Before the first step, during the probe session's run of the first batch (on a copy of the
model), the output of the first module that a sparse batch key enters (the token embedding) is
made a leaf, and the calls of ``cross_entropy`` / ``nll_loss`` are recorded. After the run:

1. the loss's targets are aligned with that key by value: which position of the key each target
   is (the same position, one ahead, two ahead, ...), for the usual layouts ([B, T] flattened,
   time-major, or only the real frames); targets that a dataset key provides as they are (a
   tagging task) are the dataset's definition, not leakage, and are not judged;
2. a few predictions are probed with one backward pass each: which input positions reach them.

A prediction that reads the position holding its answer is leakage; a prediction whose answer is
two or more positions beyond the last position it reads is a misalignment.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
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
from framework.check_library.probe import real_frames
from framework.check_library.tensors import format_frame, iter_tensors, user_frame
from framework.core.run_ctx import RunCtx
from framework.core.state import RunState
from framework.debug.first_step import SharedRunCheck
from framework.debug.sanity import report_findings

CHECK = "target-leakage check"

register(
    "debug_target_leakage",
    "bool",
    True,
    "First step: check with a gradient probe that a prediction does not read the input position holding its "
    "target (unshifted labels, no causal mask), and that targets are not further ahead than the model reads.",
    __name__,
)

OFFSETS = (-1, 0, 1, 2, 3)  # target at key position t + k, for the prediction at position t
AGREEMENT = 0.98  # share of the targets that must equal the key at the offset
MIN_COMPARED = 8
PROBED = 4  # predictions probed with a backward pass each
READ = 1e-6  # a gradient below this fraction of the row's largest one is rounding


@dataclass
class _Entry:
    """A leaf made of the output of the first module a token sequence enters, and how its positions map to a sparse
    batch key."""

    leaf: torch.Tensor  # [B, L, ...] or [L, B, ...]
    tokens: torch.Tensor  # the module's integer input, batch first [B, L]
    time_major: bool
    module: str


@dataclass
class _LossCall:
    scores: torch.Tensor
    target: torch.Tensor
    where: str
    function: str


@dataclass
class _Alignment:
    """Rows of a loss call mapped to (sequence, position) of ``key``; the target of row r is key[b, t + offset]."""

    key: str
    rows: torch.Tensor  # indices into the loss's flattened rows
    seqs: torch.Tensor
    positions: torch.Tensor
    offset: int


class _Watch(TorchFunctionMode):
    """Makes the first embedding's output a leaf (a forward hook) and records class-loss calls."""

    def __init__(self, model: nn.Module, batch_size: int):
        super().__init__()
        self.batch_size = batch_size
        self.names = {id(m): name or "(model)" for name, m in model.named_modules()}
        # The outputs of the first modules that token sequences enter, made leaves: the first (a language model's
        # or an encoder's tokens) and another sequence (an encoder-decoder's decoder inputs), at most one each.
        self.entries: list[_Entry] = []
        self.calls: list[_LossCall] = []

    @property
    def entry(self) -> _Entry | None:
        return self.entries[0] if self.entries else None

    def hook(self, module: nn.Module, args: tuple, output: Any) -> Any:
        if not isinstance(output, torch.Tensor) or not output.is_floating_point():
            return None
        tokens = next((t for t in iter_tensors(args) if not t.is_floating_point() and t.dim() == 2), None)
        if tokens is None or output.shape[:2] != tokens.shape or self.batch_size not in tokens.shape:
            return None
        if len(self.entries) == 2 or (self.entries and not self._another_sequence(tokens)):
            return None
        if not output.requires_grad:
            return None
        if self.entries:
            time_major = self.entries[0].time_major
        elif tokens.shape[0] == tokens.shape[1]:  # as long as the batch: a transposed view is time-major
            time_major = tokens.stride(0) < tokens.stride(1)
        else:
            time_major = tokens.shape[1] == self.batch_size
        leaf = output.detach().requires_grad_()
        batch_first = tokens.t() if time_major else tokens
        name = self.names.get(id(module), type(module).__name__)
        self.entries.append(_Entry(leaf, batch_first.detach(), time_major, name))
        return leaf

    def _another_sequence(self, tokens: torch.Tensor) -> bool:
        """Whether ``tokens`` are a second token sequence (an encoder-decoder's decoder inputs); token-type ids
        (one value), position ids and the first sequence embedded again are not."""
        batch_first = tokens.t() if self.entries[0].time_major else tokens
        if batch_first.shape[0] != self.batch_size or len(tokens.unique()) < 2:
            return False
        first = self.entries[0].tokens
        return not (
            bool((batch_first == batch_first[:1]).all())
            or (batch_first.shape == first.shape and torch.equal(batch_first, first))
        )

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        if func in (F.cross_entropy, F.nll_loss) and self.entry is not None and len(self.calls) < 2:
            scores = args[0] if args else kwargs.get("input")
            target = args[1] if len(args) > 1 else kwargs.get("target")
            if isinstance(target, torch.Tensor) and not target.is_floating_point() and scores.requires_grad:
                self.calls.append(_LossCall(scores, target.detach(), format_frame(user_frame()), func.__name__))
        return out


def sequence_lengths(batch: dict[str, torch.Tensor], key: str) -> torch.Tensor:
    real = real_frames(batch, key)
    values = batch[key]
    return real.sum(1).cpu() if real is not None else torch.full((values.shape[0],), values.shape[1])


def layouts(numel: int, batch_size: int, lengths: torch.Tensor) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
    """(sequence, position) of each flattened row, for the layouts a loss's targets are usually in."""
    if numel % batch_size == 0:
        width = numel // batch_size
        rows = torch.arange(numel)
        yield rows // width, rows % width  # [B, W] flattened
        yield rows % batch_size, rows // batch_size  # time-major [W, B] flattened
    for cut in (0, 1, 2):  # only the real frames (targets[mask]), possibly without the last `cut` of each
        kept = (lengths - cut).clamp_min(0)
        if int(kept.sum()) == numel and numel > 0:
            seqs = torch.repeat_interleave(torch.arange(batch_size), kept)
            starts = torch.cumsum(kept, 0) - kept
            yield seqs, torch.arange(numel) - starts[seqs]


def agreement(target: torch.Tensor, values: torch.Tensor, lengths: torch.Tensor, seqs, positions) -> float | None:
    """The share of the valid targets equal to ``values`` at (seq, position) (None: too few to compare)."""
    valid = (target >= 0) & (positions >= 0) & (positions < lengths[seqs]) & (positions < values.shape[1])
    compared = target[valid]
    # A per-sequence label (one position) or a few label values can agree with tokens by chance.
    if len(compared) < MIN_COMPARED or len(compared.unique()) < 3 or len(positions[valid].unique()) < 2:
        return None
    return float((compared == values[seqs[valid], positions[valid]]).float().mean())


def align(target: torch.Tensor, batch: dict[str, torch.Tensor], key: str, others: list[str]) -> _Alignment | None:
    """Where in ``key`` the targets come from, or None (no offset fits, or another key provides them as they are)."""
    target = target.reshape(-1).cpu()
    values, lengths = batch[key].cpu(), sequence_lengths(batch, key)
    for seqs, positions in layouts(target.numel(), values.shape[0], lengths):
        for other in others:
            agreed = agreement(target, batch[other].cpu(), sequence_lengths(batch, other), seqs, positions)
            if agreed is not None and agreed >= AGREEMENT:
                return None  # the dataset's own targets: a tagging or copying task as defined
        for offset in OFFSETS:
            agreed = agreement(target, values, lengths, seqs, positions + offset)
            if agreed is not None and agreed >= AGREEMENT:
                valid = (target >= 0) & (positions + offset >= 0) & (positions + offset < lengths[seqs])
                rows = valid.nonzero().squeeze(1)
                return _Alignment(key, rows, seqs[rows], positions[rows], offset)
    return None


def input_shift(tokens: torch.Tensor, values: torch.Tensor, lengths: torch.Tensor) -> int | None:
    """s such that the model's input at position p is the key at p + s (inputs[:, :-1] is 0, a BOS prepended -1)."""
    seqs = torch.arange(tokens.shape[0]).repeat_interleave(tokens.shape[1])
    positions = torch.arange(tokens.shape[1]).repeat(tokens.shape[0])
    flat = tokens.reshape(-1).cpu()
    for shift in (0, -1, 1):
        agreed = agreement(flat, values, lengths, seqs, positions + shift)
        if agreed is not None and agreed >= AGREEMENT:
            return shift
    return None


def _rows(scores: torch.Tensor) -> torch.Tensor:
    """The loss input as [rows, classes]: cross_entropy takes [N, C] or [B, C, d1, ...]."""
    return scores if scores.dim() == 2 else scores.movedim(1, -1).reshape(-1, scores.shape[1])


def _reads(entry: _Entry, rows: torch.Tensor, probes: list[tuple[int, int]]) -> list[torch.Tensor | None]:
    """Per probed (row, sequence): which input positions of the sequence reach that prediction (None: none).

    One backward pass for all of them: the probed rows are of different sequences, and sequences
    do not mix (the batch-independence check names a model where they do).
    """
    generator = torch.Generator().manual_seed(0)
    total = sum((rows[row] * torch.randn(rows.shape[1], generator=generator).to(rows)).sum() for row, _ in probes)
    (grad,) = torch.autograd.grad(total, entry.leaf, retain_graph=True, allow_unused=True)
    if grad is None:
        return [None] * len(probes)
    grad = grad.movedim(1, 0) if entry.time_major else grad
    found = []
    for _, seq in probes:
        magnitude = grad[seq].abs().reshape(grad.shape[1], -1).amax(1)
        peak = float(magnitude.max())
        found.append(magnitude > READ * peak if peak > 0 else None)
    return found


def judge(entry: _Entry, call: _LossCall, alignment: _Alignment, shift: int) -> Finding | None:
    """A finding when probed predictions read their answer or are asked for one beyond what they read."""
    rows = _rows(call.scores)
    if rows.shape[0] != call.target.numel():
        return None
    answers = alignment.positions + alignment.offset - shift  # each target's position in the model's input
    inside = ((answers >= 0) & (answers < entry.tokens.shape[1])).nonzero().squeeze(1)
    if len(inside) == 0:
        return None
    order = inside[torch.argsort(alignment.positions[inside], descending=True, stable=True)]  # late: a past to read
    picks: dict[int, int] = {}  # sequence -> the flattened index of its probed prediction
    for index in order.tolist():
        picks.setdefault(int(alignment.seqs[index]), index)
        if len(picks) == PROBED:
            break
    probes = [(int(alignment.rows[i]), seq) for seq, i in picks.items()]
    leaks, gaps = 0, []
    for (row, seq), index, read in zip(probes, picks.values(), _reads(entry, rows, probes), strict=True):
        if read is None:
            continue
        answer = int(alignment.positions[index]) + alignment.offset - shift
        if bool(read[answer]) and bool(entry.tokens[seq, answer] == call.target.reshape(-1)[row]):
            leaks += 1  # reads its answer as it is (a masked position, as in masked LM training, is no copy)
        gaps.append(answer - int(read.nonzero().max()))
    key, k = alignment.key, alignment.offset
    what = (
        f"{call.function} at {call.where} scores the prediction at position t against token t{k:+d} of {key!r}"
        if k
        else f"{call.function} at {call.where} scores the prediction at position t against token t of {key!r}"
    )
    if gaps and leaks * 2 > len(gaps) and k - shift == 0 and _reads_ahead(entry, rows, alignment, shift):
        log.v5(
            f"Target leakage check: {what}, and its predictions read the whole sequence, positions after their own "
            f"too: a reconstruction of the input (an autoencoder's task), not a next-token prediction; not judged."
        )
        return None
    where = {"op": call.function, "line": call.where, "key": key, "module": entry.module}
    if gaps and leaks * 2 > len(gaps):
        cause = (
            "The labels are not shifted: a next-token model predicts token t+1 from tokens up to t (logits[:, :-1] "
            "against tokens[:, 1:]; Hugging Face *ForCausalLM models shift labels=input_ids themselves)."
            if k <= 0
            else "The model sees the future: mask attention causally (is_causal=True, or a triu mask), or use a "
            "unidirectional RNN."
        )
        return Finding(
            "warning",
            "sanity check",
            f"target leakage: {what}, and that prediction reads the input at the target's own position (gradient "
            f"probe through the output of module {entry.module!r} on the first batch: {leaks} of {len(gaps)} probed "
            f"positions), so the model can copy its answer instead of predicting it; the loss drops towards 0 and "
            f"nothing is learned. {cause}",
            evidence={"target_offset": k, "input_shift": shift, "reading_their_answer": leaks, "probed": len(gaps)},
            where=where,
            fix="Mask attention causally (is_causal=True, or a triu mask), or use a unidirectional RNN."
            if k > 0
            else "Shift the labels: logits[:, :-1] against tokens[:, 1:].",
        )
    if gaps and min(gaps) >= 2:
        return Finding(
            "warning",
            "sanity check",
            f"targets misaligned: {what}, but that prediction reads the input only up to position t (gradient probe "
            f"on the first batch), so it must guess {min(gaps)} tokens ahead; the loss stays far above what the "
            f"model could reach. Labels shifted twice? (Hugging Face *ForCausalLM models shift labels themselves: "
            f"pass labels=input_ids unshifted.)",
            evidence={"target_offset": k, "input_shift": shift, "tokens_ahead": min(gaps), "probed": len(gaps)},
            where=where,
            fix="Shift the labels once (a Hugging Face *ForCausalLM model shifts labels=input_ids itself).",
        )
    return None


def _reads_ahead(entry: _Entry, rows: torch.Tensor, alignment: _Alignment, shift: int) -> bool:
    """Whether the prediction at the earliest scored position reads input positions after its own answer's: a model
    that sees the whole sequence for every position (an autoencoder reconstructing its input), which a next-token
    model never is."""
    answers = alignment.positions + alignment.offset - shift
    index = int(torch.argmin(alignment.positions))
    answer = int(answers[index])
    if not 0 <= answer < entry.tokens.shape[1] - 1:
        return False
    (read,) = _reads(entry, rows, [(int(alignment.rows[index]), int(alignment.seqs[index]))])
    return read is not None and bool(read[answer + 1 :].any())


class TargetLeakage(SharedRunCheck):
    """Watches the first batch's probe run, then probes its predictions along the time axis."""

    bug_check = ("debug_target_leakage",)

    check = CHECK

    @classmethod
    def from_config(cls, config: Config, state: RunState) -> TargetLeakage | None:
        return cls() if config.bool("debug_target_leakage") else None

    def applies(self, state: RunState) -> bool:
        sparse = [k for k, key in state.extern_data.items() if key.sparse_dim is not None and k in state.batch]
        return bool(sparse) and len(state.batch_indices) >= 2

    @contextlib.contextmanager
    def observe(self, state: RunState, model: nn.Module) -> Iterator[_Watch]:
        watch = _Watch(model, len(state.batch_indices))
        handles = [m.register_forward_hook(watch.hook) for m in model.modules()]
        try:
            with watch:
                yield watch
        finally:
            for handle in handles:
                handle.remove()

    def conclude(self, state: RunState, watch: _Watch, run_ctx: RunCtx | None) -> None:
        found = self._judge(state, watch)
        if found is not None:
            off = "debug_target_leakage = False"
            report_findings(state, "first step", [found], ModelCheckError, False, off=off)

    @staticmethod
    def _judge(state: RunState, watch: _Watch) -> Finding | None:
        if not watch.entries or not watch.calls:
            return None
        sparse = [
            k for k, key in state.extern_data.items() if key.sparse_dim is not None and state.batch.get(k) is not None
        ]
        sparse = [k for k in sparse if state.batch[k].dim() == 2]  # token sequences [B, T]
        # With two token sequences (an encoder-decoder) only the decoder's inputs are judged: the encoder reads the
        # whole source by design (a copy task copies on purpose); teacher forcing feeds the decoder the targets shifted
        # right by one, so that a prediction reads only earlier answers.
        for entry in watch.entries[-1:]:
            for key in sparse:
                shift = input_shift(entry.tokens, state.batch[key].cpu(), sequence_lengths(state.batch, key))
                if shift is None:
                    continue
                for call in watch.calls:
                    alignment = align(call.target, state.batch, key, [k for k in sparse if k != key])
                    if alignment is None:
                        continue
                    with torch.enable_grad():
                        found = judge(entry, call, alignment, shift)
                    log.v5(
                        f"Target leakage check: the targets of {call.function} at {call.where} are token "
                        f"t{alignment.offset:+d} of {key!r}, which enters module {entry.module!r}"
                        + ("." if found else "; no prediction reads its answer.")
                    )
                    if found:
                        return found
        return None


PLUGINS = (TargetLeakage,)
