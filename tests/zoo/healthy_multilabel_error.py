# Zoo healthy twin, over healthy_multilabel.py: the Hamming error of the loss's own decisions (logit > 0, i.e. a
# sigmoid above 0.5), beside an accuracy marked as an error score too (it rises under perfect predictions).
import torch
from torch import nn


def train_step(*, model, extern_data, run_ctx, **_kwargs):
    logits = model(extern_data["data"])
    tags = extern_data["classes"]
    loss_fn = nn.BCEWithLogitsLoss(pos_weight=torch.tensor(pos_weight, device=logits.device))  # noqa: F821
    run_ctx.mark_as_loss(name="bce", loss=loss_fn(logits, tags))
    predicted = (torch.sigmoid(logits) > 0.5).float()
    run_ctx.mark_as_loss(name="err", loss=(predicted != tags).float().mean(), as_error=True)
    run_ctx.mark_as_loss(name="acc", loss=(predicted == tags).float().mean(), as_error=True)
