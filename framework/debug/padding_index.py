"""Is an embedding's padding id only padding? (``debug_padding_index``, on by default.)

``nn.Embedding(..., padding_idx=k)`` declares that id ``k`` marks padding: its vector starts at zero and never
gets a gradient. Where ``k`` is also a real id of the data (the first entity, relation or word of a vocabulary
that starts at 0), that id's vector stays zero for the whole run, and every example with it gets nothing from
it: nothing says so, the loss still falls on the other ids.

Configured against applied, in the probe session's run of the first batch: the input of each embedding that
has a ``padding_idx`` is traced to the batch key it is (the same memory), and the id is counted where it cannot
be padding: in a key without a time axis (one id per sequence), inside a sequence's real frames (before its
length), or, in a key stored padded to a fixed length, followed later in its row by another id (padding only
ever trails). An embedding fed anything else (computed ids, a tokenizer's output) is not judged.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass, field

import torch
from torch import nn

from framework.base.config import Config
from framework.base.errors import ModelCheckError
from framework.base.findings import Finding
from framework.base.options import register
from framework.core.run_ctx import RunCtx
from framework.core.state import RunState
from framework.debug.first_step import SharedRunCheck, batch_key
from framework.debug.sanity import report_findings

CHECK = "padding-index check"

register(
    "debug_padding_index",
    "bool",
    True,
    "First step: an nn.Embedding's padding_idx that is also a real id of the batch key it reads (its vector stays "
    "zero and never learns).",
    __name__,
)


@dataclass
class _EmbeddingInputs:
    """The ids each embedding with a padding_idx got in the first batch: module name -> (padding_idx, ids)."""

    seen: dict[str, tuple[int, torch.Tensor]] = field(default_factory=dict)


def _real_occurrences(ids: torch.Tensor, pad: int, lengths: torch.Tensor | None) -> tuple[int, int]:
    """(how many entries of ``ids`` [B] or [B, T, ...] are ``pad`` where they cannot be padding, how many entries
    could be real at all)."""
    if ids.dim() == 1:
        return int((ids == pad).sum()), ids.numel()
    rows = ids.reshape(ids.shape[0], ids.shape[1], -1)
    if lengths is not None:
        real = torch.arange(rows.shape[1])[None, :] < lengths.cpu()[:, None]
        real = real[..., None].expand_as(rows)
        return int(((rows == pad) & real).sum()), int(real.sum())
    # stored padded: an entry is padding only when every later entry of its row is padding too
    not_pad = (rows != pad).flip(1).cumsum(1).flip(1) > 0  # a real id at this position or later
    later_real = torch.cat([not_pad[:, 1:], torch.zeros_like(not_pad[:, :1])], 1)
    return int(((rows == pad) & later_real).sum()), int(not_pad.sum())


class PaddingIndexCheck(SharedRunCheck):
    """Names an embedding whose padding_idx occurs as a real id of the batch key it reads."""

    bug_check = ("debug_padding_index",)

    check = CHECK

    @classmethod
    def from_config(cls, config: Config, state: RunState) -> PaddingIndexCheck | None:
        return cls() if config.bool("debug_padding_index") else None

    def applies(self, state: RunState) -> bool:
        return any(key.sparse_dim is not None for key in state.extern_data.values())

    @contextlib.contextmanager
    def observe(self, state: RunState, model: nn.Module) -> Iterator[_EmbeddingInputs]:
        inputs = _EmbeddingInputs()
        handles = []
        for name, module in model.named_modules():
            if isinstance(module, nn.Embedding) and module.padding_idx is not None:

                def note(module: nn.Module, args: tuple, name: str = name) -> None:
                    if args and isinstance(args[0], torch.Tensor):
                        inputs.seen.setdefault(name, (module.padding_idx, args[0]))

                handles.append(module.register_forward_pre_hook(note))
        try:
            yield inputs
        finally:
            for handle in handles:
                handle.remove()

    def conclude(self, state: RunState, inputs: _EmbeddingInputs, run_ctx: RunCtx | None) -> None:
        findings = []
        for module, (pad, ids) in inputs.seen.items():
            key = batch_key(state, ids, sparse=True)
            if key is None:
                continue
            count, total = _real_occurrences(ids, pad, state.batch.get(key + ":seq_len"))
            if not count:
                continue
            findings.append(
                Finding(
                    "warning",
                    "sanity check",
                    f"Embedding '{module}' has padding_idx={pad}, but {pad} is a real id of {key!r}, the key it reads: "
                    f"{count} of the {total} real entries of {key!r} in the first batch are {pad} (where they cannot "
                    f"be padding). The vector of id {pad} stays zero and never gets a gradient, so every example with "
                    f"it gets nothing from it. If {pad} is a real id, drop padding_idx (or give padding an id of its "
                    f"own); if a zero vector for it is intended, set debug_padding_index = False.",
                    evidence={"padding_idx": pad, "key": key, "real_entries_with_it": count, "real_entries": total},
                    where={"module": module, "key": key},
                    fix=f"drop padding_idx={pad} from Embedding '{module}', or pad {key!r} with an id of its own",
                    option="debug_padding_index = False",
                )
            )
        report_findings(state, "first step", findings, ModelCheckError, False, off="debug_padding_index = False")


PLUGINS = (PaddingIndexCheck,)
