# Corpus bug (thesouther/MARL#8): the periodic target-network update loads the target network's own weights instead of
# the online network's, so the bootstrap targets come from the initial random network forever. Task: Q-learning from
# logged transitions of a 6-state chain (step left or right, reward 1 on reaching the right end); the error is the
# mean absolute error of Q against the optimal Q*. Twin: ++bug False.
import copy

import numpy as np
import torch
from torch import nn

from framework.datasets.numpy_dataset import NumpyDataset

bug = True
STATES, GAMMA, SYNC_EVERY = 6, 0.9, 25


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
        n = 3000 if split == "train" else 300
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
batch_size = 32
num_epochs = 3
learning_rate = 3e-3


class Agent(nn.Module):
    def __init__(self):
        super().__init__()
        self.online = nn.Sequential(nn.Embedding(STATES, 32), nn.ReLU(), nn.Linear(32, 2))
        self.target = copy.deepcopy(self.online).requires_grad_(False)
        self.updates = 0

    def sync_target(self):
        self.target.load_state_dict((self.target if bug else self.online).state_dict())


def get_model(**_kwargs):
    return Agent()


def train_step(*, model, extern_data, run_ctx, **_kwargs):
    if model.training:
        model.updates += 1
        if model.updates % SYNC_EVERY == 0:
            model.sync_target()
    q = model.online(extern_data["state"]).gather(1, extern_data["action"][:, None]).squeeze(1)
    with torch.no_grad():
        following = model.target(extern_data["next_state"]).max(-1).values
        wanted = extern_data["reward"] + GAMMA * (1 - extern_data["done"]) * following
    run_ctx.mark_as_loss(name="td", loss=nn.functional.mse_loss(q, wanted))
    every_state = torch.arange(STATES - 1, device=q.device)
    error = (model.online(every_state) - torch.from_numpy(OPTIMAL[:-1]).to(q.device)).abs().mean()
    run_ctx.mark_as_loss(name="err", loss=error, as_error=True)


OPTIMAL = optimal_q()
