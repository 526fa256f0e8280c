# Zoo bug, over classify.py (after Lightning-AI/pytorch-lightning#9599, written anew): the loss is multiplied by a
# mixed-precision loss scale (2^16) and the gradient norm is clipped at 1 on those scaled gradients, so every update
# is cut to max_norm times the learning rate whatever the gradient. ++loss_scale 1 is the healthy twin.
loss_scale = 2.0**16
gradient_clip_global_norm = 1.0
optimizer = {"class": "sgd"}


def train_step(*, model, extern_data, run_ctx, **_kwargs):
    logits = model(extern_data["data"])
    loss = nn.functional.cross_entropy(logits, extern_data["classes"])  # noqa: F821
    run_ctx.mark_as_loss(name="ce", loss=loss, scale=loss_scale)
