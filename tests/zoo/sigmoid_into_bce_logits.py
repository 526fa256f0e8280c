# Bug: sigmoid applied to the scores before binary_cross_entropy_with_logits, which applies it again.
import torch
import torch.nn.functional as F


def train_step(*, model, extern_data, run_ctx, **_kwargs):
    probs = torch.sigmoid(model(extern_data["data"]))
    targets = F.one_hot(extern_data["classes"], 4).float()
    run_ctx.mark_as_loss(name="bce", loss=F.binary_cross_entropy_with_logits(probs, targets))
