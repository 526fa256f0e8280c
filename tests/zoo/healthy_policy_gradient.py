# Healthy corpus (on healthy_vectors.py): policy gradient, REINFORCE with a running-mean baseline, as the RL tutorials
# write a contextual bandit: the surrogate loss is no measure of progress (the miss rate is).
import torch
from torch import nn


def get_model(**_):
    return nn.Sequential(nn.Linear(16, 64), nn.Tanh(), nn.Linear(64, 4))


_baseline = [0.0]


def train_step(*, model, extern_data, run_ctx, **_):
    logits = model(extern_data["data"])
    dist = torch.distributions.Categorical(logits=logits)
    action = dist.sample()
    reward = (action == extern_data["classes"]).float()
    advantage = reward - _baseline[0]
    if run_ctx.train_flag:
        _baseline[0] = 0.9 * _baseline[0] + 0.1 * float(reward.mean())
    run_ctx.mark_as_loss(name="pg", loss=-(dist.log_prob(action) * advantage).mean())
    run_ctx.mark_as_loss(name="miss", loss=1 - reward.mean(), as_error=True)
