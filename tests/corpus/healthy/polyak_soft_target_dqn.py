# Healthy corpus: DQN with a Polyak-averaged target network, as DDPG/SAC and CleanRL's DQN (tau < 1) do. Q-learning
# from logged transitions of a 7-state corridor (reward 1 on reaching the right end, which ends the episode; the done
# mask is applied). The target network gets no gradient; after every update it moves a little toward the online
# network, target = (1 - tau) * target + tau * online with tau = 0.01, so its values lag behind. The error is the mean
# absolute error of the online Q against the optimal Q*.
import copy

import numpy as np
import torch
from torch import nn

from framework.datasets.numpy_dataset import NumpyDataset

STATES, GAMMA, TAU = 7, 0.9, 0.01


def step(state, action):
    following = min(state + 1, STATES - 1) if action == 1 else max(state - 1, 0)
    done = following == STATES - 1
    return following, float(done), float(done)


def optimal_q():
    q = np.zeros((STATES, 2))
    for _ in range(200):
        for s in range(STATES - 1):
            for a in range(2):
                following, reward, done = step(s, a)
                q[s, a] = reward + GAMMA * (1 - done) * q[following].max()
    return q.astype(np.float32)


class Transitions(NumpyDataset):
    def __init__(self, split, **kwargs):
        rng = np.random.default_rng(0 if split == "train" else 1)
        n = 4000 if split == "train" else 300
        states, actions = rng.integers(0, STATES - 1, size=n), rng.integers(0, 2, size=n)
        outcomes = np.array([step(s, a) for s, a in zip(states, actions, strict=True)], dtype=np.float32)
        arrays = {
            "state": states,
            "action": actions,
            "next_state": outcomes[:, 0].astype(np.int64),
            "reward": outcomes[:, 1],
            "done": outcomes[:, 2],
        }
        super().__init__(arrays, sparse_dims={"state": STATES, "action": 2, "next_state": STATES}, **kwargs)


train = {"class": Transitions, "split": "train"}
dev = {"class": Transitions, "split": "dev"}
extern_data = {
    "state": {"shape": (), "dtype": "int64", "sparse_dim": STATES},
    "action": {"shape": (), "dtype": "int64", "sparse_dim": 2},
    "next_state": {"shape": (), "dtype": "int64", "sparse_dim": STATES},
    "reward": {"shape": (), "dtype": "float32"},
    "done": {"shape": (), "dtype": "float32"},
}
batch_size = 16
num_epochs = 4
learning_rate = 3e-3


class Agent(nn.Module):
    def __init__(self):
        super().__init__()
        self.online = nn.Sequential(nn.Embedding(STATES, 32), nn.ReLU(), nn.Linear(32, 2))
        self.target = copy.deepcopy(self.online).requires_grad_(False)


def get_model(**_kwargs):
    return Agent()


def train_step(*, model, extern_data, run_ctx, **_kwargs):
    q = model.online(extern_data["state"]).gather(1, extern_data["action"][:, None]).squeeze(1)
    with torch.no_grad():
        following = model.target(extern_data["next_state"]).max(-1).values
        wanted = extern_data["reward"] + GAMMA * (1 - extern_data["done"]) * following
    run_ctx.mark_as_loss(name="td", loss=nn.functional.mse_loss(q, wanted))
    every_state = torch.arange(STATES - 1, device=q.device)
    error = (model.online(every_state) - torch.from_numpy(OPTIMAL[:-1]).to(q.device)).abs().mean()
    run_ctx.mark_as_loss(name="err", loss=error, as_error=True)
    if run_ctx.train_flag:
        with torch.no_grad():  # the soft (Polyak) update, after the online network's step was computed
            for target_param, online_param in zip(model.target.parameters(), model.online.parameters(), strict=True):
                target_param.mul_(1 - TAU).add_(online_param, alpha=TAU)


OPTIMAL = optimal_q()
