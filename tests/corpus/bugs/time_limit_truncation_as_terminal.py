# Corpus bug (hill-a/stable-baselines#863): environments wrapped in a TimeLimit end every episode after a fixed number
# of steps with done=True, and the agent stored these artificial terminals in its replay buffer as real ones, so the
# TD target at the cut was the reward alone and the values of states that never end were pulled down. Task: a
# continuing task (it never terminates) on a ring of 8 positions observed as (cos, sin) of the angle: stepping left or
# right, arriving at position 0 pays 1. Transitions are logged from episodes cut by a time limit of 5 steps (the
# environment's done is True at the cut, info's TimeLimit.truncated too); Q-learning with a target network synced
# every 25 updates. The error is the mean absolute error of Q against the optimal Q* of the continuing task. Twin:
# ++bug False (done is ignored when the episode was truncated: the target bootstraps there too).
import copy

import numpy as np
import torch
from torch import nn

from framework.datasets.numpy_dataset import NumpyDataset

bug = True
STATES, GAMMA, TIME_LIMIT, SYNC_EVERY = 8, 0.9, 5, 25


def step(state, action):
    following = (state + (1 if action == 1 else -1)) % STATES
    return following, 1.0 if following == 0 else 0.0


def optimal_q():
    q = np.zeros((STATES, 2))
    for _ in range(300):
        for s in range(STATES):
            for a in range(2):
                following, reward = step(s, a)
                q[s, a] = reward + GAMMA * q[following].max()
    return q.astype(np.float32)


def observe(states):
    angle = 2 * np.pi * np.asarray(states, dtype=np.float64) / STATES
    return np.stack([np.cos(angle), np.sin(angle)], axis=-1).astype(np.float32)


class Transitions(NumpyDataset):
    """Episodes of TIME_LIMIT random steps from random starts; the last step of each is cut by the time limit."""

    def __init__(self, split, **kwargs):
        rng = np.random.default_rng(0 if split == "train" else 1)
        episodes = 800 if split == "train" else 80
        rows = []
        for _ in range(episodes):
            state = int(rng.integers(0, STATES))
            for t in range(TIME_LIMIT):
                action = int(rng.integers(0, 2))
                following, reward = step(state, action)
                cut = t == TIME_LIMIT - 1
                rows.append((state, action, following, reward, float(cut), float(cut)))  # done, truncated
                state = following
        states, actions, following, rewards, done, truncated = (np.array(column) for column in zip(*rows, strict=True))
        arrays = {
            "obs": observe(states),
            "action": actions.astype(np.int64),
            "next_obs": observe(following),
            "reward": rewards.astype(np.float32),
            "done": done.astype(np.float32),
            "truncated": truncated.astype(np.float32),
        }
        super().__init__(arrays, sparse_dims={"action": 2}, **kwargs)


train = {"class": Transitions, "split": "train"}
dev = {"class": Transitions, "split": "dev"}
extern_data = {
    "obs": {"shape": (2,)},
    "action": {"shape": (), "dtype": "int64", "sparse_dim": 2},
    "next_obs": {"shape": (2,)},
    "reward": {"shape": (), "dtype": "float32"},
    "done": {"shape": (), "dtype": "float32"},
    "truncated": {"shape": (), "dtype": "float32"},
}
batch_size = 32
num_epochs = 5
learning_rate = 3e-3


class Agent(nn.Module):
    def __init__(self):
        super().__init__()
        self.online = nn.Sequential(nn.Linear(2, 64), nn.ReLU(), nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 2))
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
    done = extern_data["done"]
    if not bug:  # a time-limit cut is not a terminal state
        done = done * (1 - extern_data["truncated"])
    with torch.no_grad():
        following = model.target(extern_data["next_obs"]).max(-1).values
        wanted = extern_data["reward"] + GAMMA * (1 - done) * following
    run_ctx.mark_as_loss(name="td", loss=nn.functional.smooth_l1_loss(q, wanted))
    every = torch.from_numpy(observe(np.arange(STATES))).to(q.device)
    error = (model.online(every) - torch.from_numpy(OPTIMAL).to(q.device)).abs().mean()
    run_ctx.mark_as_loss(name="err", loss=error, as_error=True)


OPTIMAL = optimal_q()
