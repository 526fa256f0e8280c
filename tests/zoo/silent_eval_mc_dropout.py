# Healthy, over silent_eval_base.py: Monte Carlo dropout. Dropout stays on (training=True on purpose) and the
# evaluation averages the class probabilities of 8 passes of the same input.
import torch
from torch.nn import functional as F


class Net(Net):  # noqa: F821 (silent_eval_base.py's)
    def forward(self, x):
        h = F.dropout(F.relu(self.norm(self.hidden(x))), p=0.2, training=True)
        return self.out(F.relu(self.mix(h)))


def train_step(*, model, extern_data, run_ctx, **_kwargs):
    passes = 1 if run_ctx.train_flag else 8
    probs = torch.stack([model(extern_data["data"]).softmax(-1) for _ in range(passes)]).mean(0)
    run_ctx.mark_as_loss(name="nll", loss=F.nll_loss(probs.clamp_min(1e-8).log(), extern_data["classes"]))
