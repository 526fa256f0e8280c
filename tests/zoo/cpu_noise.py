# Bug: noise created with torch.randn(...) without device= (on a GPU it stays on the CPU), and a
# train_step that hard-codes the batch size in a view.
import torch
from torch import nn


class NoisyNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.hidden = nn.Linear(8, 32)
        self.out = nn.Linear(32, 4)

    def forward(self, x):
        h = torch.relu(self.hidden(x))
        noise = torch.randn(h.shape[0], 32) * 0.01
        return self.out(h + noise)


def get_model(*, epoch, step, **_kwargs):
    return NoisyNet()


def train_step(*, model, extern_data, run_ctx, **_kwargs):
    x = extern_data["data"].view(8, 8)
    logits = model(x)
    run_ctx.mark_as_loss(name="ce", loss=nn.functional.cross_entropy(logits, extern_data["classes"]))
