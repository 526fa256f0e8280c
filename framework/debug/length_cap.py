"""Sequences cut at one length, and whether the cut decided them (``debug_length_cap``, on by default).

A tokenizer's ``max_length``, a crop or a ``[:max_len]`` in a dataset cuts every longer sequence at one length,
without a word. Often that is intended and harmless; when what comes after the cut decides the label (the cue at
the end of a long document, the last words of an utterance), the model cannot learn those sequences, and nothing
says why.

Information kept through the pipeline, decided by an experiment. At startup, each variable-length key of the dev
dataset (the train dataset without one) has its lengths read where that needs no data (``key_lengths``): a pile-up at
the longest length (at least a fifth of the sequences and 30 of them, five times as many as any shorter length, with
the shorter ones spread over five or more lengths) says the sequences were cut there. That alone is no finding. After
training, the sequences at the cap and the longest ones that end below it are scored apart through the evaluation
path, on a copy with every random state kept, and the uncut ones once more without their last quarter. When the cut
ones score far worse than the uncut ones (above twice their error plus 0.05, by the error score the step marks), and
the uncut ones do too without their ends, what comes late in a sequence decides it and the cut removed that: a
warning with the three numbers. Longer sequences that are harder for another reason lose nothing with their ends, and
a cut that costs nothing is a choice: nothing is said.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from framework.base import log
from framework.base.config import Config
from framework.base.findings import Finding, report
from framework.base.options import register
from framework.base.rng import objects_random_state_kept
from framework.check_library.data_checks import key_lengths
from framework.check_library.probe import model_copy, parameters_kept, unseen
from framework.core.events import Event
from framework.core.plugin import Plugin, on
from framework.core.state import RunState
from framework.core.step import run_step
from framework.datasets.loader import to_device

register(
    "debug_length_cap",
    "bool",
    True,
    "At startup: a variable-length key whose lengths pile up at their maximum (sequences cut at one length); after "
    "training, the cut sequences scored apart from the longest uncut ones, and a warning when the cut ones score far "
    "worse (what the cut removed decided them).",
    __name__,
)

CHECK = "length-cap check"
OFF = "debug_length_cap = False"
SHARE, LEAST, PILE, SPREAD = 0.2, 30, 5, 5  # the pile-up: share and count at the cap, against any shorter length
SCORED = 256  # sequences of each group scored
BATCH = 32


@dataclass
class Cap:
    """A key whose sequences look cut at ``length``."""

    dataset: str
    key: str
    length: int
    lengths: np.ndarray

    def groups(self) -> tuple[np.ndarray, np.ndarray]:
        """(indices of sequences at the cap, of the longest ones below it), at most SCORED each."""
        cut = np.flatnonzero(self.lengths == self.length)
        cut = cut[:: max(1, len(cut) // SCORED)][:SCORED]
        uncut = np.flatnonzero(self.lengths < self.length)
        uncut = uncut[np.argsort(-self.lengths[uncut], kind="stable")][: min(SCORED, len(cut))]
        return cut, np.sort(uncut)


def cut_length(lengths: np.ndarray) -> int | None:
    """The length the sequences look cut at: a pile-up at the longest length; None when there is none."""
    if len(lengths) == 0:
        return None
    top = int(lengths.max())
    at = int((lengths == top).sum())
    below = lengths[lengths < top]
    if at < max(LEAST, SHARE * len(lengths)) or len(np.unique(below)) < SPREAD:
        return None
    return top if at >= PILE * int(np.bincount(below).max()) else None


def _without_last_quarter(batch: dict[str, torch.Tensor], key: str) -> bool:
    """Shorten every sequence of ``key`` in ``batch`` by a quarter (its length, and its frames past the new end set
    to the batch's padding value); False when another key has a variable length too (frames to cut alike)."""
    lengths = batch.get(f"{key}:seq_len")
    if lengths is None or any(k.endswith(":seq_len") and k != f"{key}:seq_len" for k in batch):
        return False
    values = batch[key]
    short = torch.clamp((lengths * 3 + 3) // 4, min=1)
    positions = torch.arange(values.shape[1])[None, :]
    padded = positions >= lengths[:, None]
    pad = values[padded][0] if bool(padded.any()) else torch.zeros((), dtype=values.dtype)
    values[positions >= short[:, None]] = pad
    batch[f"{key}:seq_len"] = short.to(lengths.dtype)
    return True


class LengthCap(Plugin):
    """Finds keys cut at one length at startup; scores the cut sequences apart from the uncut ones after training."""

    bug_check = ("debug_length_cap",)

    def __init__(self) -> None:
        self.caps: list[Cap] = []

    @classmethod
    def from_config(cls, config: Config, state: RunState) -> LengthCap | None:
        return cls() if config.bool("debug_length_cap") else None

    @on(Event.STARTUP)
    def find(self, state: RunState) -> None:
        name = "dev" if "dev" in state.loaders else "train"
        loader = state.loaders.get(name)
        if loader is None:
            return
        for key, declared in state.extern_data.items():
            if None not in tuple(declared.shape or ())[:1]:
                continue  # only keys of variable length
            lengths = key_lengths(loader.dataset, key)
            length = cut_length(lengths) if lengths is not None else None
            if length is not None:
                self.caps.append(Cap(name, key, length, lengths))
                log.v5(f"Length-cap check: {name} key {key!r} looks cut at length {length}.")

    @on(Event.FINISH)
    def decide(self, state: RunState) -> None:
        for cap in self.caps:
            try:
                scored = self._score(state, cap)
            except Exception as exc:  # noqa: BLE001 - an experiment that cannot run decides nothing
                log.v5(f"Length-cap check: scoring {cap.dataset} key {cap.key!r} failed ({exc!r}).")
                continue
            if scored is None:
                continue
            name, (cut, uncut, shortened), groups = scored
            # the cut ones worse, and the uncut ones worse without their ends: what comes late decides a sequence
            # (longer sequences that are harder for another reason lose nothing when their ends go)
            if cut > 2 * uncut + 0.05 and shortened > 2 * uncut + 0.05:
                report(self._finding(cap, name, (cut, uncut, shortened), groups))
                return
            log.v4(
                f"Length-cap check: {cap.dataset} key {cap.key!r}, {name}: cut {cut:.3g}, uncut {uncut:.3g}, uncut "
                f"without their last quarter {shortened:.3g}: the cut did not decide them."
            )

    def _score(
        self, state: RunState, cap: Cap
    ) -> tuple[str, tuple[float, float, float], tuple[np.ndarray, np.ndarray]] | None:
        """(the error's name, its mean over the cut, the uncut and the uncut shortened by a quarter, the groups);
        None when the experiment does not apply (few sequences, no error score, other keys of variable length)."""
        cut_ids, uncut_ids = cap.groups()
        if min(len(cut_ids), len(uncut_ids)) < LEAST:
            return None
        loader = state.loaders[cap.dataset]
        epoch = max(state.epoch, 1)
        size = min(BATCH, state.config.int("max_seqs") or BATCH)
        means: list[float] = []
        name = None
        with (
            unseen(),
            torch.no_grad(),
            objects_random_state_kept(loader.dataset),
            parameters_kept(state.model, "The length-cap check's run"),
        ):
            copy = model_copy(state.model).eval()
            for ids, shortened in ((cut_ids, False), (uncut_ids, False), (uncut_ids, True)):
                total = count = 0.0
                for start in range(0, len(ids), size):
                    chunk = ids[start : start + size]
                    batch = loader.tensor_batch(chunk, epoch)
                    if shortened and not _without_last_quarter(batch, cap.key):
                        return None
                    run_ctx = run_step(
                        state.config, copy, to_device(batch, state.device), "eval", epoch=epoch, step=state.global_step
                    )
                    name = name or next((n for n, m in run_ctx.losses.items() if m.as_error), None)
                    if name is None or name not in run_ctx.losses:
                        return None  # only an error score: a loss's scale (a likelihood below 0) says nothing here
                    total += float(run_ctx.losses[name].normalized()) * len(chunk)
                    count += len(chunk)
                means.append(total / count)
        return name, (means[0], means[1], means[2]), (cut_ids, uncut_ids)

    @staticmethod
    def _finding(
        cap: Cap, name: str, scores: tuple[float, float, float], groups: tuple[np.ndarray, np.ndarray]
    ) -> Finding:
        cut, uncut, shortened = scores
        lengths, n = cap.lengths, len(cap.lengths)
        at = int((lengths == cap.length).sum())
        uncut_lengths = lengths[groups[1]]
        return Finding(
            "warning",
            CHECK,
            f"{cap.dataset} key {cap.key!r}: {at} of {n} sequences ({at / n:.0%}) have exactly the longest length, "
            f"{cap.length}, and none is longer, while the others spread from {int(lengths.min())} to "
            f"{int(lengths[lengths < cap.length].max())}: the sequences look cut at {cap.length}. Scored apart after "
            f"training (evaluation path, on a copy), the {len(groups[0])} cut ones have {name} {cut:.3f} and the "
            f"{len(groups[1])} longest uncut ones (lengths {int(uncut_lengths.min())} to {int(uncut_lengths.max())}) "
            f"{uncut:.3f}, and {shortened:.3f} when those are read without their last quarter: what comes late in a "
            f"sequence decides it, the cut removed that from the cut sequences, and the model never sees it. Keep "
            f"whole "
            f"sequences: raise the maximum length, or read long ones in windows and combine their outputs. ({OFF} "
            f"turns this check off.)",
            evidence={
                "cut_length": cap.length,
                "cut_sequences": at,
                "sequences": n,
                "score": name,
                "cut_score": cut,
                "uncut_score": uncut,
                "uncut_without_last_quarter": shortened,
            },
            where={"dataset": cap.dataset, "key": cap.key},
            fix="Keep whole sequences: a larger maximum length, or windows whose outputs are combined.",
            option=OFF,
        )


PLUGINS = (LengthCap,)
