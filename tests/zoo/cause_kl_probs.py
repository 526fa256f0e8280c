# Bug (on classify.py): distillation-style kl_div given the student's probabilities, where torch expects
# log-probabilities as its input (the target is the probabilities); the loss has no minimum where it should.
import torch
from torch import nn

train = {**train, "num_seqs": 400}  # 50 steps: enough to judge
num_epochs = 1


def train_step(*, model, extern_data, run_ctx, **_kwargs):
    logits = model(extern_data["data"])
    targets = extern_data["classes"]
    soft = nn.functional.one_hot(targets, 4).float() * 0.9 + 0.025
    loss = nn.functional.kl_div(torch.softmax(logits, -1), soft, reduction="batchmean")
    run_ctx.mark_as_loss(name="kl", loss=loss)
    run_ctx.mark_as_loss(name="fer", loss=(logits.argmax(-1) != targets).float().mean(), as_error=True)
