# Bug: a padding mask built from the lengths as they are: extern_data[...:seq_len] stays on the
# CPU, so on a GPU the comparison mixes devices (it needs lengths.to(targets.device)).
import torch
from torch import nn


def train_step(*, model, extern_data, run_ctx, **_kwargs):
    logits = model(extern_data["data"])
    targets, lengths = extern_data["classes"], extern_data["classes:seq_len"]
    mask = torch.arange(targets.shape[1], device=targets.device)[None, :] < lengths[:, None]
    run_ctx.mark_as_loss(name="ce", loss=nn.functional.cross_entropy(logits[mask], targets[mask]))
