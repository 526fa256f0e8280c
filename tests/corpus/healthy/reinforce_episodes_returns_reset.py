# Healthy corpus: REINFORCE as in pytorch/examples' reinforcement_learning/reinforce.py: each batch plays complete
# episodes, the discounted return is accumulated backwards and restarted at every episode's end (R = r + gamma * R
# with R = 0 after the terminal step), the returns are standardised, and the loss is -log pi(a|s) times the return.
# Task: a chain of 10 cells, start and goal from the dataset, reward 1 on reaching the goal, at most 16 moves, discount
# 0.9. The error 'err' is the regret of the greedy policy on dev.
import numpy as np
import torch
from torch import nn

CELLS, MOVES, GAMMA = 10, 16, 0.9


def episodes(num, seed):
    rng = np.random.default_rng(seed)
    goal = rng.integers(0, CELLS, num)
    start = (goal + rng.integers(1, CELLS, num)) % CELLS
    return {"start": start.astype(np.int64), "goal": goal.astype(np.int64)}


train = {"class": "NumpyDataset", "arrays": episodes(4096, seed=1)}
dev = {"class": "NumpyDataset", "arrays": episodes(1024, seed=2)}
extern_data = {
    "start": {"shape": (), "dtype": "int64", "sparse_dim": CELLS},
    "goal": {"shape": (), "dtype": "int64", "sparse_dim": CELLS},
}
batch_size = 64
num_epochs = 4
learning_rate = 3e-3


def get_model(**_kwargs):
    return nn.Sequential(nn.Linear(2 * CELLS, 64), nn.Tanh(), nn.Linear(64, 2))


def train_step(*, model, extern_data, run_ctx, **_kwargs):
    cell, goal = extern_data["start"], extern_data["goal"]
    running = torch.ones_like(cell, dtype=torch.bool)
    log_probs, rewards, alive = [], [], []
    for _ in range(MOVES):
        obs = torch.cat([nn.functional.one_hot(cell, CELLS), nn.functional.one_hot(goal, CELLS)], -1).float()
        policy = torch.distributions.Categorical(logits=model(obs))
        action = policy.sample() if run_ctx.train_flag else policy.probs.argmax(-1)
        log_probs.append(policy.log_prob(action))
        alive.append(running.float())
        cell = torch.where(running, (cell + 2 * action - 1).clamp(0, CELLS - 1), cell)
        reached = running & (cell == goal)
        rewards.append(reached.float())
        running = running & ~reached
    returns, R = [], torch.zeros_like(rewards[0])
    for t in reversed(range(MOVES)):  # R = r + gamma * R, restarted at each episode's end
        R = rewards[t] + GAMMA * R * (1 - rewards[t])
        R = R * alive[t]
        returns.insert(0, R)
    returns, mask = torch.stack(returns), torch.stack(alive)
    live = returns[mask.bool()]
    returns = (returns - live.mean()) / (live.std() + 1e-8)
    loss = (-torch.stack(log_probs) * returns * mask).sum() / mask.sum()
    run_ctx.mark_as_loss(loss, "policy")
    if not run_ctx.train_flag:
        achieved = sum(GAMMA**t * rewards[t] for t in range(MOVES))
        optimal = GAMMA ** ((extern_data["start"] - goal).abs().float() - 1)
        run_ctx.mark_as_loss((optimal - achieved).mean(), "err", as_error=True)
