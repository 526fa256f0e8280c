# Corpus bug (nikhilbarhate99/PPO-PyTorch#8): the discounted returns of a rollout are accumulated backwards without
# resetting the running return where an episode ended, so each episode's returns include the rewards of the episode
# after it, and the critic's value targets are wrong near every episode's end. Task: the critic of a fixed policy on
# a corridor (start 1 to 10 steps from the goal, one step closer per move, reward 1 on reaching it); the error is the
# mean absolute error of V(state) against the true value GAMMA ** (distance - 1). Twin: ++bug False (the running
# return is reset at terminal states).
import numpy as np
import torch
from torch import nn

from framework.datasets.numpy_dataset import NumpyDataset

bug = True
MAX_DISTANCE, GAMMA = 10, 0.9


class Rollout(NumpyDataset):
    def __init__(self, split, **kwargs):
        rng = np.random.default_rng(0 if split == "train" else 1)
        states, rewards, is_terminals = [], [], []
        while len(states) < (4000 if split == "train" else 500):
            for distance in range(rng.integers(1, MAX_DISTANCE + 1), 0, -1):
                states.append(distance)
                rewards.append(float(distance == 1))
                is_terminals.append(distance == 1)
        returns, discounted_reward = [], 0.0
        for reward, is_terminal in zip(reversed(rewards), reversed(is_terminals), strict=True):
            if is_terminal and not bug:
                discounted_reward = 0.0
            discounted_reward = reward + GAMMA * discounted_reward
            returns.insert(0, discounted_reward)
        arrays = {"state": np.array(states), "return": np.array(returns, dtype=np.float32)}
        super().__init__(arrays, sparse_dims={"state": MAX_DISTANCE + 1}, **kwargs)


train = {"class": Rollout, "split": "train"}
dev = {"class": Rollout, "split": "dev"}
extern_data = {
    "state": {"shape": (), "dtype": "int64", "sparse_dim": MAX_DISTANCE + 1},
    "return": {"shape": (), "dtype": "float32"},
}
batch_size = 32
num_epochs = 3
learning_rate = 3e-3


def get_model(**_kwargs):
    return nn.Sequential(nn.Embedding(MAX_DISTANCE + 1, 32), nn.ReLU(), nn.Linear(32, 1))


def train_step(*, model, extern_data, run_ctx, **_kwargs):
    state = extern_data["state"]
    value = model(state).squeeze(-1)
    run_ctx.mark_as_loss(name="value", loss=nn.functional.mse_loss(value, extern_data["return"]))
    true_value = GAMMA ** (state.to(torch.float32) - 1)
    run_ctx.mark_as_loss(name="err", loss=(value - true_value).abs().mean(), as_error=True)
