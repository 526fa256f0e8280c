# Zoo healthy, over classify.py: cross-entropy with a z-loss on the softmax normaliser (logsumexp of the logits,
# scaled 1e-3, as PaLM and ST-MoE train) and the error rate of the loss's own argmax beside them.
from torch import nn


def train_step(*, model, extern_data, run_ctx, **_kwargs):
    logits = model(extern_data["data"])
    targets = extern_data["classes"]
    run_ctx.mark_as_loss(name="ce", loss=nn.functional.cross_entropy(logits, targets))
    run_ctx.mark_as_loss(name="z", loss=logits.logsumexp(-1).pow(2).mean(), scale=1e-3)
    run_ctx.mark_as_loss(name="err", loss=(logits.argmax(dim=-1) != targets).float().mean(), as_error=True)
