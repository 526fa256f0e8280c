# Healthy corpus: BYOL-style self-supervised learning on 16-dimensional cluster data. An online encoder, projector and
# predictor regress the projection of another augmented view made by a target encoder and projector; the target gets
# no gradient (requires_grad False) and follows the online weights by an exponential moving average (EMA) in
# train_step under torch.no_grad(). A linear probe on the detached online features (online evaluation) gives the error.
import copy

import torch
from torch import nn

train = {"class": "GaussianClustersDataset", "split": "train", "num_seqs": 3000, "dim": 16, "num_classes": 8}
dev = {"class": "GaussianClustersDataset", "split": "test", "num_seqs": 3000, "dim": 16, "num_classes": 8}
extern_data = {"data": {"shape": (16,)}, "classes": {"shape": (), "dtype": "int64", "sparse_dim": 8}}
batch_size = 64
num_epochs = 2
learning_rate = 2e-3
TAU = 0.99


def mlp(inputs, hidden, outputs):
    return nn.Sequential(nn.Linear(inputs, hidden), nn.BatchNorm1d(hidden), nn.ReLU(), nn.Linear(hidden, outputs))


class Byol(nn.Module):
    def __init__(self):
        super().__init__()
        self.online = nn.Sequential(mlp(16, 64, 32), mlp(32, 64, 16))  # encoder, projector
        self.predictor = mlp(16, 64, 16)
        self.target = copy.deepcopy(self.online).requires_grad_(False)
        self.probe = nn.Linear(32, 8)

    def augment(self, x):
        return (x + 0.5 * torch.randn_like(x)) * (torch.rand_like(x) > 0.2)


def get_model(**_kwargs):
    return Byol()


def regression_loss(prediction, target):
    return 2 - 2 * nn.functional.cosine_similarity(prediction, target, dim=-1).mean()


def train_step(*, model, extern_data, run_ctx, **_kwargs):
    x = extern_data["data"]
    view1, view2 = model.augment(x), model.augment(x)
    with torch.no_grad():
        target1, target2 = model.target(view1), model.target(view2)
    loss = regression_loss(model.predictor(model.online(view1)), target2)
    loss = loss + regression_loss(model.predictor(model.online(view2)), target1)
    run_ctx.mark_as_loss(name="byol", loss=loss)
    logits = model.probe(model.online[0](x).detach())
    run_ctx.mark_as_loss(name="probe_ce", loss=nn.functional.cross_entropy(logits, extern_data["classes"]))
    run_ctx.mark_as_loss(name="err", loss=(logits.argmax(-1) != extern_data["classes"]).float().mean(), as_error=True)
    if run_ctx.train_flag:
        with torch.no_grad():  # the momentum update of the target: no gradient ever reaches it
            for target_param, online_param in zip(model.target.parameters(), model.online.parameters(), strict=True):
                target_param.lerp_(online_param, 1 - TAU)
