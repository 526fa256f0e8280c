"""``report_attention``: the attention weights of the first dev batch, for the heatmaps of ``report.html``.

At the end of training, ``train_step`` runs once more in the probe session (a copy of the model in
eval mode, RNG and gradients restored: the run is not perturbed) on the first batch of ``dev``,
and the attention weights of every attention module are kept for the batch's first sequence:
torch's ``nn.MultiheadAttention`` (asked for per-head weights, its fused fast path off for this
run) and Hugging Face attention modules (the copy computes attention the eager way, which returns
the weights; its configs ask for ``output_attentions``). They go to ``<model directory>/attention.npz``: one ``[heads, queries, keys]`` array
per module path, at most ``MAX_POSITIONS`` positions each way and ``MAX_MODULES`` modules, and the first
sequence's input tokens (``TOKENS``), which label the heatmaps' axes.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import numpy as np
import torch
from torch import nn

from framework.base import log
from framework.base.config import Config
from framework.base.disk import beside_checkpoints, write_atomically
from framework.base.options import register
from framework.check_library.probe import ProbeLimit, ProbeSession
from framework.core.events import Event
from framework.core.measurements import LABEL_KEYS
from framework.core.plugin import Plugin, on
from framework.core.state import RunState

register(
    "report_attention",
    "bool",
    False,
    "At the end of training, keep the attention weights of the first dev batch (nn.MultiheadAttention, Hugging Face "
    "attention) in <model directory>/attention.npz: heatmaps in report.html.",
    __name__,
)

FILE_NAME = "attention.npz"
MAX_MODULES = 12
MAX_POSITIONS = 64
TOKENS = "__tokens__"  # the entry of the first sequence's input tokens (labels of the heatmaps' axes)


def attention_modules(model: nn.Module) -> dict[str, nn.Module]:
    """torch's and Hugging Face's attention modules of ``model``, by module path."""
    found = {}
    for name, module in model.named_modules():
        if isinstance(module, nn.MultiheadAttention) or (
            type(module).__name__.endswith("Attention") and type(module).__module__.startswith("transformers.")
        ):
            found[name or "(model)"] = module
    return found


@contextlib.contextmanager
def captured_weights(model: nn.Module) -> Iterator[dict[str, np.ndarray]]:
    """Within the block, the per-head attention weights of the first sequence that each attention module of
    ``model`` (a copy: its Hugging Face configs are switched to eager attention) computes, by module path."""
    weights: dict[str, np.ndarray] = {}
    # A weights tensor that an outer module passes on is kept once, under the inner module. The tensors themselves
    # are held (not their ids): a freed tensor's id is reused by the next layer's weights, which were then skipped.
    seen: list[torch.Tensor] = []
    handles = []

    def ask_for_weights(module: nn.Module, args: tuple, kwargs: dict) -> tuple[tuple, dict]:
        return args, {**kwargs, "need_weights": True, "average_attn_weights": False}

    def keep(name: str):
        def hook(module: nn.Module, args: Any, output: Any) -> None:
            found = output[1] if isinstance(output, tuple) and len(output) > 1 else None
            if (
                isinstance(found, torch.Tensor)
                and found.dim() == 4
                and not any(found is kept for kept in seen)
                and len(weights) < MAX_MODULES
            ):
                seen.append(found)
                weights[name] = found[0, :, :MAX_POSITIONS, :MAX_POSITIONS].detach().float().cpu().numpy()

        return hook

    modules = attention_modules(model)
    for name, module in reversed(list(modules.items())):  # inner modules' hooks first: they name the weights
        if isinstance(module, nn.MultiheadAttention):
            handles.append(module.register_forward_pre_hook(ask_for_weights, with_kwargs=True))
        handles.append(module.register_forward_hook(keep(name)))
    for module in model.modules():  # Hugging Face models return attention weights when their config asks for them
        config = getattr(module, "config", None)
        if config is not None and hasattr(config, "output_attentions") and hasattr(config, "_attn_implementation"):
            config._attn_implementation = "eager"  # the fused kernels (sdpa, flash) compute no weights
            config.output_attentions = True
    fast_path = torch.backends.mha.get_fastpath_enabled()
    torch.backends.mha.set_fastpath_enabled(False)  # the fused path of nn.TransformerEncoderLayer returns no weights
    try:
        yield weights
    finally:
        torch.backends.mha.set_fastpath_enabled(fast_path)
        for handle in handles:
            handle.remove()


def first_sequence_tokens(state: RunState, batch: dict[str, torch.Tensor]) -> list[str]:
    """The input tokens of the batch's first sequence, as the dataset's labels (its ``labels``: a list, or a dict by
    key) or ids: of the one variable-length class-id key that no loss scores against (``data`` among several);
    [] when there is none."""
    scored = state.store.get(LABEL_KEYS) or []
    keys = [
        name
        for name, key in state.extern_data.items()
        if key.sparse_dim and key.variable and name not in scored and name in batch and batch[name].dim() == 2
    ]
    if len(keys) != 1 and "data" not in keys:
        return []
    key = keys[0] if len(keys) == 1 else "data"
    length = int(batch[f"{key}:seq_len"][0]) if f"{key}:seq_len" in batch else batch[key].shape[1]
    ids = batch[key][0, : min(length, MAX_POSITIONS)].tolist()
    labels = getattr(state.loaders["dev"].dataset, "labels", None)
    labels = labels.get(key) if isinstance(labels, dict) else labels
    if not isinstance(labels, (list, tuple)):
        return [str(i) for i in ids]
    return [str(labels[i]) if 0 <= i < len(labels) else str(i) for i in ids]


class AttentionMaps(Plugin):
    """Keeps the attention weights of the first dev batch at the end of training."""

    needs = (LABEL_KEYS,)  # the keys the losses score against are not the tokens attended over

    def __init__(self, path: str):
        self.path = path

    @classmethod
    def from_config(cls, config: Config, state: RunState) -> AttentionMaps | None:
        prefix = config.get("model")
        writes = state.distributed is None or state.distributed.rank == 0
        if not config.bool("report_attention") or not prefix or not writes or state.task != "train":
            return None
        return cls(beside_checkpoints(prefix, FILE_NAME))

    @on(Event.FINISH)
    def keep_weights(self, state: RunState) -> None:
        loader = state.loaders.get("dev")
        if loader is None or not attention_modules(state.model):
            what = "no dev dataset" if loader is None else "no nn.MultiheadAttention or Hugging Face attention module"
            log.v3(f"report_attention: the run has {what}; no attention weights are kept.")
            return
        batch = loader.first_batch(max(state.epoch, 1))
        if batch is None:
            return
        session = ProbeSession(state)
        try:
            with session.isolated("attention maps") as model, captured_weights(model) as weights, torch.no_grad():
                session.changed_run("attention maps", model, batch, stage="eval")
        except ProbeLimit as exc:
            log.v3(f"report_attention: no attention weights kept: {exc}.")
            return
        if not weights:
            log.v3("report_attention: the attention modules returned no weights in this run; none are kept.")
            return

        tokens = first_sequence_tokens(state, batch)

        def save(f: Any) -> None:
            np.savez(f, **weights, **({TOKENS: np.array(tokens)} if tokens else {}))

        write_atomically(self.path, save, "the attention weights", "Free space or set report_attention = False.")
        log.v4(f"Kept the attention weights of {len(weights)} module(s) for the first dev batch in {self.path}.")


PLUGINS = (AttentionMaps,)
