# Zoo bug, over classify.py: the step means to rule out class 3 (not allowed for these inputs) but calls masked_fill
# as a statement, so the scores stay as they were. Twin: ++bug False (the in-place masked_fill_).
import torch
from torch import nn

bug = True


def train_step(*, model, extern_data, run_ctx, **_kwargs):
    logits = model(extern_data["data"])
    banned = torch.zeros_like(logits, dtype=torch.bool)
    banned[:, 3] = extern_data["classes"] != 3
    if bug:
        logits.masked_fill(banned, -1e4)
    else:
        logits = logits.masked_fill(banned, -1e4)
    run_ctx.mark_as_loss(name="ce", loss=nn.functional.cross_entropy(logits, extern_data["classes"]))
