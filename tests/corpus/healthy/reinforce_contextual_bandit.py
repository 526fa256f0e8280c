# Healthy corpus: REINFORCE on a contextual bandit with a learned baseline. The policy samples an arm per context,
# the reward is 1 for the arm a hidden linear rule prefers, and the loss is -log pi(a|s) times the (detached)
# advantage plus the baseline's squared error; the error is 1 - the reward of the greedy arm.
import numpy as np
import torch
from torch import nn

from framework.datasets.numpy_dataset import NumpyDataset

ARMS = 3
RULE = torch.from_numpy(np.random.default_rng(9).normal(size=(4, ARMS)).astype(np.float32))


class Contexts(NumpyDataset):
    def __init__(self, split, **kwargs):
        rng = np.random.default_rng(0 if split == "train" else 1)
        super().__init__({"data": rng.normal(size=(3000 if split == "train" else 500, 4)).astype(np.float32)}, **kwargs)


train = {"class": Contexts, "split": "train"}
dev = {"class": Contexts, "split": "dev"}
extern_data = {"data": {"shape": (4,)}}
batch_size = 32
num_epochs = 2
learning_rate = 3e-3


class Agent(nn.Module):
    def __init__(self):
        super().__init__()
        self.policy = nn.Sequential(nn.Linear(4, 32), nn.Tanh(), nn.Linear(32, ARMS))
        self.baseline = nn.Sequential(nn.Linear(4, 32), nn.Tanh(), nn.Linear(32, 1))


def get_model(**_kwargs):
    return Agent()


def train_step(*, model, extern_data, run_ctx, **_kwargs):
    context = extern_data["data"]
    best = (context @ RULE.to(context.device)).argmax(-1)
    logits = model.policy(context)
    arm = torch.distributions.Categorical(logits=logits).sample()
    reward = (arm == best).float()
    value = model.baseline(context).squeeze(-1)
    log_prob = logits.log_softmax(-1).gather(1, arm[:, None]).squeeze(1)
    run_ctx.mark_as_loss(name="pg", loss=-(log_prob * (reward - value).detach()).mean())
    run_ctx.mark_as_loss(name="baseline", loss=nn.functional.mse_loss(value, reward))
    run_ctx.mark_as_loss(name="err", loss=(logits.argmax(-1) != best).float().mean(), as_error=True)
