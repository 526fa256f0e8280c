# Zoo bug, over classify.py: the broadcast error rate of cause_classify_error_broadcast.py ([B] predictions against
# [B, 1] labels) in a step that also penalises the softmax normaliser (a z-loss on logsumexp of the logits, as PaLM
# and ST-MoE train): the objective has a second term on the same scores. Twin: healthy_classify_zloss.py.
from torch import nn


def train_step(*, model, extern_data, run_ctx, **_kwargs):
    logits = model(extern_data["data"])
    labels = extern_data["classes"].view(-1, 1)
    run_ctx.mark_as_loss(name="ce", loss=nn.functional.cross_entropy(logits, labels[:, 0]))
    run_ctx.mark_as_loss(name="z", loss=logits.logsumexp(-1).pow(2).mean(), scale=1e-3)
    run_ctx.mark_as_loss(name="err", loss=(logits.argmax(-1) != labels).float().mean(), as_error=True)
