# Bug: the loss computed by hand from GPT-2's logits, against the input tokens themselves (not shifted).
import torch
from torch import nn


def train_step(*, model, extern_data, run_ctx, **_kwargs):
    tokens, lengths = extern_data["data"], extern_data["data:seq_len"]
    mask = torch.arange(tokens.shape[1], device=tokens.device)[None, :] < lengths.to(tokens.device)[:, None]
    logits = model(input_ids=tokens, attention_mask=mask.long()).logits
    run_ctx.mark_as_loss(name="ce", loss=nn.functional.cross_entropy(logits[mask], tokens[mask]))
