# Healthy corpus (on healthy_vectors.py): a model built on the meta device (parameters without memory), then
# materialised with to_empty and initialised by each module's own reset_parameters, as large-model code does.
import torch
from torch import nn


def get_model(**_kwargs):
    with torch.device("meta"):
        body = nn.Sequential(nn.Linear(16, 64), nn.ReLU())
    body.to_empty(device="cpu")
    for module in body.modules():
        if isinstance(module, nn.Linear):
            module.reset_parameters()
    head = nn.Linear(64, 4, device="meta").to_empty(device="cpu")
    head.reset_parameters()
    return nn.Sequential(body, head)


def train_step(*, model, extern_data, run_ctx, **_kwargs):
    logits = model(extern_data["data"])
    targets = extern_data["classes"]
    run_ctx.mark_as_loss(name="ce", loss=nn.functional.cross_entropy(logits, targets))
    run_ctx.mark_as_loss(name="fer", loss=(logits.argmax(-1) != targets).float().mean(), as_error=True)
