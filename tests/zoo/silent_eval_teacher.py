# Healthy: distillation from a frozen teacher run in eval mode under torch.no_grad() inside train_step.
import torch
from torch import nn
from torch.nn import functional as F

frozen_params = ["teacher.*"]


class Distill(nn.Module):
    def __init__(self):
        super().__init__()
        self.student = Net()
        self.teacher = Net()

    def forward(self, x):
        return self.student(x)


def get_model(*, epoch, step, **_kwargs):
    return Distill()


def train_step(*, model, extern_data, run_ctx, **_kwargs):
    model.teacher.eval()
    with torch.no_grad():
        soft = model.teacher(extern_data["data"]).softmax(-1)
    logits = model(extern_data["data"])
    run_ctx.mark_as_loss(name="ce", loss=F.cross_entropy(logits, extern_data["classes"]))
    run_ctx.mark_as_loss(name="kd", loss=F.cross_entropy(logits, soft), scale=0.5)
