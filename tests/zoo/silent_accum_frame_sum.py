# Healthy twin of silent_accum_token_mean.py: the loss per real frame (RETURNN's convention: the
# optimizer sees the sum), so the accumulated gradient is exactly the window's.
import torch
from torch import nn

train = {"class": "Task12AXDataset", "num_seqs": 96}
accum_grad_multiple_step = 4
batch_size = 300


def train_step(*, model, extern_data, run_ctx, **_kwargs):
    logits = model(extern_data["data"])
    targets, lengths = extern_data["classes"], extern_data["classes:seq_len"]
    mask = torch.arange(targets.shape[1], device=targets.device)[None, :] < lengths.to(targets.device)[:, None]
    run_ctx.mark_as_loss(name="ce", loss=nn.functional.cross_entropy(logits[mask], targets[mask], reduction="none"))
