# Healthy corpus: advantage actor-critic with n-step bootstrapped returns, in the manner of pytorch/examples'
# reinforcement_learning/actor_critic.py (a policy head trained by log-probability times a detached advantage, a
# value head regressing the returns) with A2C's n-step bootstrapping and entropy bonus. Task: a chain of 12 cells
# whose moves slip to the other direction with probability 0.1 in training; start and goal from the dataset, reward
# 1 on reaching the goal, discount 0.9, at most 20 moves, played inside train_step. Actor and critic each have their
# own Adam. The error 'err' is the regret of the greedy policy on dev without slips.
import numpy as np
import torch
from torch import nn

CELLS, MOVES, DISCOUNT, N_STEP, SLIP, ENTROPY = 12, 20, 0.9, 4, 0.1, 0.01


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
num_epochs = 6
learning_rate = 3e-3
optimizers = {
    "actor": {"class": "adam", "params": "actor.*"},
    "critic": {"class": "adam", "params": "critic.*", "learning_rate": 5e-3},
}


class ActorCritic(nn.Module):
    def __init__(self):
        super().__init__()
        self.actor = nn.Sequential(nn.Linear(2 * CELLS, 64), nn.Tanh(), nn.Linear(64, 2))
        self.critic = nn.Sequential(nn.Linear(2 * CELLS, 64), nn.Tanh(), nn.Linear(64, 1))


def get_model(**_kwargs):
    return ActorCritic()


def observe(cell, goal):
    return torch.cat([nn.functional.one_hot(cell, CELLS), nn.functional.one_hot(goal, CELLS)], dim=-1).float()


def train_step(*, model, extern_data, run_ctx, **_kwargs):
    cell, goal = extern_data["start"], extern_data["goal"]
    running = torch.ones_like(cell, dtype=torch.bool)
    log_probs, entropies, values, rewards, alive = [], [], [], [], []
    for _ in range(MOVES):
        obs = observe(cell, goal)
        policy = torch.distributions.Categorical(logits=model.actor(obs))
        move = policy.sample() if run_ctx.train_flag else policy.probs.argmax(dim=-1)
        log_probs.append(policy.log_prob(move))
        entropies.append(policy.entropy())
        values.append(model.critic(obs).squeeze(-1))
        alive.append(running.float())
        if run_ctx.train_flag:
            move = torch.where(torch.rand(len(move), device=move.device) < SLIP, 1 - move, move)
        cell = torch.where(running, (cell + 2 * move - 1).clamp(0, CELLS - 1), cell)
        reached = running & (cell == goal)
        rewards.append(reached.float())
        running = running & ~reached
    values.append(model.critic(observe(cell, goal)).squeeze(-1) * running.float())  # bootstrap at the time limit
    alive.append(running.float())
    frozen = [v.detach() * a for v, a in zip(values, alive, strict=True)]
    returns = []
    for t in range(MOVES):  # n-step return: rewards up to n moves ahead, then the critic's (detached) value
        target, scale, done = torch.zeros_like(rewards[0]), 1.0, torch.zeros_like(rewards[0])
        for k in range(t, min(t + N_STEP, MOVES)):
            target = target + scale * rewards[k] * (1 - done)
            done = torch.maximum(done, rewards[k])
            scale *= DISCOUNT
        end = min(t + N_STEP, MOVES)
        returns.append(target + scale * frozen[end] * (1 - done))
    returns, values = torch.stack(returns), torch.stack(values[:MOVES])
    mask = torch.stack(alive[:MOVES])
    steps = mask.sum()
    advantage = (returns - values).detach()
    actor_loss = -(torch.stack(log_probs) * advantage + ENTROPY * torch.stack(entropies)) * mask
    run_ctx.mark_as_loss(actor_loss.sum() / steps, "actor", optimizer="actor")
    run_ctx.mark_as_loss(((values - returns) ** 2 * mask).sum() / steps, "critic", optimizer="critic")
    if not run_ctx.train_flag:
        achieved = sum(DISCOUNT**t * rewards[t] for t in range(MOVES))
        optimal = DISCOUNT ** ((extern_data["start"] - goal).abs().float() - 1)
        run_ctx.mark_as_loss((optimal - achieved).mean(), "err", as_error=True)
