# Loaded after tiny_config.py: models written the way people write them that a first-step probe must not
# trip over (case = ...), each a healthy model unless it says otherwise.
import logging
import threading

import torch
from torch import nn

case = "lock"
_log = logging.getLogger("user_model")


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 3))
        self.lock = threading.Lock()  # deepcopy cannot copy it: no probe can run on a copy
        self.seen = 0

    def forward(self, x):
        self.seen += 1
        if case == "shape" and self.seen == 1:
            x = x[:, :3]  # a shape bug in the first call: the first real step would raise the same
        if case == "log":
            _log.warning("USERLOG forward call %d of shape %s", self.seen, tuple(x.shape))
        out = self.net(x)
        if case == "eval_list" and not self.training:
            return [out]  # an API that returns predictions in eval mode, like torchvision's detectors
        return out


def get_model(**_kwargs):
    model = Model()
    if case != "lock":
        model.lock = None
    return model


def train_step(*, model, extern_data, run_ctx, **_kwargs):
    logits = model(extern_data["data"])
    if isinstance(logits, list):
        logits = logits[0]
    if case == "log_scalar":
        run_ctx.log_scalar("logit_mean", logits.mean())
    run_ctx.mark_as_loss(name="ce", loss=nn.functional.cross_entropy(logits, extern_data["classes"]))


torch.manual_seed(0)
