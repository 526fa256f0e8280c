# Corpus bug (navneet-nmk/pytorch-rl#2): the DQN computes its target Q values as r + gamma * max_a Q_target(s', a) for
# every transition, without the done mask, so transitions that end an episode bootstrap from the value of a next state
# that does not follow (the network's guess for the terminal observation) and the values near the episode ends, and
# from there everywhere, are biased. Task: Q-learning from logged transitions of a 9-state corridor observed as the
# agent's position (a number in [0, 1], as gym observations are features, not state ids): stepping into the right end
# pays 1, into the left end -1, and both end the episode; a target network synced every 25 updates. The error is the
# mean absolute error of Q against the optimal Q* over the non-terminal states. Twin: ++bug False (the done mask).
import copy

import numpy as np
import torch
from torch import nn

from framework.datasets.numpy_dataset import NumpyDataset

bug = True
STATES, GAMMA, SYNC_EVERY = 9, 0.9, 25


def step(state, action):
    following = state + 1 if action == 1 else state - 1
    done = following in (0, STATES - 1)
    reward = 1.0 if following == STATES - 1 else -1.0 if following == 0 else 0.0
    return following, reward, float(done)


def optimal_q():
    q = np.zeros((STATES, 2))
    for _ in range(200):
        for s in range(1, STATES - 1):
            for a in range(2):
                following, reward, done = step(s, a)
                q[s, a] = reward + GAMMA * (1 - done) * q[following].max()
    return q.astype(np.float32)


def observe(states):
    return (np.asarray(states, dtype=np.float32) / (STATES - 1))[:, None]


class Transitions(NumpyDataset):
    def __init__(self, split, **kwargs):
        rng = np.random.default_rng(0 if split == "train" else 1)
        n = 3000 if split == "train" else 300
        states, actions = rng.integers(1, STATES - 1, size=n), rng.integers(0, 2, size=n)
        outcomes = np.array([step(s, a) for s, a in zip(states, actions, strict=True)], dtype=np.float32)
        arrays = {
            "obs": observe(states),
            "action": actions,
            "next_obs": observe(outcomes[:, 0]),
            "reward": outcomes[:, 1],
            "done": outcomes[:, 2],
        }
        super().__init__(arrays, sparse_dims={"action": 2}, **kwargs)


train = {"class": Transitions, "split": "train"}
dev = {"class": Transitions, "split": "dev"}
extern_data = {
    "obs": {"shape": (1,)},
    "action": {"shape": (), "dtype": "int64", "sparse_dim": 2},
    "next_obs": {"shape": (1,)},
    "reward": {"shape": (), "dtype": "float32"},
    "done": {"shape": (), "dtype": "float32"},
}
batch_size = 32
num_epochs = 4
learning_rate = 3e-3


class Agent(nn.Module):
    def __init__(self):
        super().__init__()
        self.online = nn.Sequential(nn.Linear(1, 64), nn.ReLU(), nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 2))
        self.target = copy.deepcopy(self.online).requires_grad_(False)
        self.updates = 0


def get_model(**_kwargs):
    return Agent()


def train_step(*, model, extern_data, run_ctx, **_kwargs):
    if model.training:
        model.updates += 1
        if model.updates % SYNC_EVERY == 0:
            model.target.load_state_dict(model.online.state_dict())
    q = model.online(extern_data["obs"]).gather(1, extern_data["action"][:, None]).squeeze(1)
    with torch.no_grad():
        following = model.target(extern_data["next_obs"]).max(-1).values
        if bug:
            wanted = extern_data["reward"] + GAMMA * following
        else:
            wanted = extern_data["reward"] + GAMMA * (1 - extern_data["done"]) * following
    run_ctx.mark_as_loss(name="td", loss=nn.functional.smooth_l1_loss(q, wanted))
    inner = torch.from_numpy(observe(np.arange(1, STATES - 1))).to(q.device)
    error = (model.online(inner) - torch.from_numpy(OPTIMAL[1:-1]).to(q.device)).abs().mean()
    run_ctx.mark_as_loss(name="err", loss=error, as_error=True)


OPTIMAL = optimal_q()
