# Healthy corpus (on healthy_vectors.py): knowledge distillation (Hinton et al.) from a frozen teacher, as the
# distillation tutorials write it: the teacher in eval mode with requires_grad False, run under no_grad; the
# student's loss mixes KL(teacher || student) at temperature T (times T^2) with the cross-entropy on the labels.
import torch
from torch import nn

T = 2.0


class Distiller(nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(1)
        self.teacher = nn.Sequential(nn.Linear(16, 64), nn.ReLU(), nn.Linear(64, 4))
        self.teacher.requires_grad_(False)
        self.student = nn.Sequential(nn.Linear(16, 16), nn.ReLU(), nn.Linear(16, 4))

    def train(self, mode=True):
        super().train(mode)
        self.teacher.eval()  # the teacher never trains
        return self


def get_model(**_kwargs):
    return Distiller()


def train_step(*, model, extern_data, run_ctx, **_kwargs):
    x, targets = extern_data["data"], extern_data["classes"]
    with torch.no_grad():
        teacher_logits = model.teacher(x)
    logits = model.student(x)
    soft = (
        nn.functional.kl_div(
            nn.functional.log_softmax(logits / T, dim=-1),
            nn.functional.softmax(teacher_logits / T, dim=-1),
            reduction="batchmean",
        )
        * T**2
    )
    run_ctx.mark_as_loss(name="kd", loss=soft, scale=0.5)
    run_ctx.mark_as_loss(name="ce", loss=nn.functional.cross_entropy(logits, targets), scale=0.5)
