# Healthy corpus: a one-step actor-critic with an entropy bonus (stable-baselines3's A2C: loss = policy loss
# - ent_coef * entropy + value loss), on a contextual bandit where for each context one of five arms, set by a hidden
# linear rule, pays 1 and a second arm pays 0.8; the entropy term pushes the policy's entropy up by design, so the
# policy stays stochastic while its greedy arm becomes the best one. The error is the dev regret of the greedy arm.
import numpy as np
import torch
from torch import nn

from framework.datasets.numpy_dataset import NumpyDataset

ARMS, DIM, ENT_COEF = 5, 4, 0.01
RULE = torch.from_numpy(np.random.default_rng(53).normal(size=(DIM, ARMS)).astype(np.float32))


class Contexts(NumpyDataset):
    def __init__(self, split, **kwargs):
        rng = np.random.default_rng(0 if split == "train" else 1)
        super().__init__(
            {"data": rng.normal(size=(4000 if split == "train" else 500, DIM)).astype(np.float32)}, **kwargs
        )


train = {"class": Contexts, "split": "train"}
dev = {"class": Contexts, "split": "dev"}
extern_data = {"data": {"shape": (DIM,)}}
batch_size = 32
num_epochs = 3
learning_rate = 3e-3


class ActorCritic(nn.Module):
    def __init__(self):
        super().__init__()
        self.actor = nn.Sequential(nn.Linear(DIM, 64), nn.ReLU(), nn.Linear(64, ARMS))
        self.critic = nn.Sequential(nn.Linear(DIM, 64), nn.ReLU(), nn.Linear(64, 1))


def get_model(**_kwargs):
    return ActorCritic()


def rewards(context, arms):
    ranking = (context @ RULE.to(context.device)).argsort(-1, descending=True)
    return (arms == ranking[:, 0]).float() + 0.8 * (arms == ranking[:, 1]).float()


def train_step(*, model, extern_data, run_ctx, **_kwargs):
    context = extern_data["data"]
    logits = model.actor(context)
    dist = torch.distributions.Categorical(logits=logits)
    action = dist.sample()
    reward = rewards(context, action)
    value = model.critic(context).squeeze(-1)
    advantage = (reward - value).detach()
    run_ctx.mark_as_loss(name="policy", loss=-(advantage * dist.log_prob(action)).mean())
    run_ctx.mark_as_loss(name="entropy", loss=-ENT_COEF * dist.entropy().mean())
    run_ctx.mark_as_loss(name="value", loss=0.5 * nn.functional.mse_loss(value, reward))
    run_ctx.mark_as_loss(name="err", loss=(1.0 - rewards(context, logits.argmax(-1))).mean(), as_error=True)
