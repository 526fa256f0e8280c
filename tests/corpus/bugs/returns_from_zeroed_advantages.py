# Corpus bug (vwxyzjn/cleanrl#337): after a refactoring the value targets are computed as
# returns = storage.advantages + values while storage.advantages still holds zeros (the freshly computed advantages
# sit in a local variable), so the critic is trained toward its own predictions and never learns the returns, and the
# policy's GAE advantages come from an unlearnt critic. Task: cleanrl's PPO update (one epoch, clipped objective,
# normalised advantages, value loss, entropy bonus) with GAE on a chain of 14 cells whose moves slip with probability
# 0.1; start and goal from the dataset, reward 1 on reaching the goal, discount 0.95, GAE lambda 0.9, at most 24 moves,
# played inside train_step. The error 'err' is the regret of the greedy policy on dev without slips.
# Twin: ++bug False (returns = advantages + values).
import numpy as np
import torch
from torch import nn

bug = True
CELLS, MOVES, GAMMA, GAE_LAMBDA, SLIP, ENT_COEF, VF_COEF, CLIP = 14, 24, 0.95, 0.9, 0.1, 0.01, 0.5, 0.2


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
num_epochs = 2
learning_rate = 1e-3


class Agent(nn.Module):
    def __init__(self):
        super().__init__()
        self.actor = nn.Sequential(nn.Linear(2 * CELLS, 64), nn.Tanh(), nn.Linear(64, 2))
        self.critic = nn.Sequential(nn.Linear(2 * CELLS, 64), nn.Tanh(), nn.Linear(64, 1))


def get_model(**_kwargs):
    return Agent()


def observe(cell, goal):
    return torch.cat([nn.functional.one_hot(cell, CELLS), nn.functional.one_hot(goal, CELLS)], dim=-1).float()


def train_step(*, model, extern_data, run_ctx, **_kwargs):
    cell, goal = extern_data["start"], extern_data["goal"]
    running = torch.ones_like(cell, dtype=torch.bool)
    logprobs, entropies, values, rewards, alive = [], [], [], [], []
    for _ in range(MOVES):  # the rollout
        obs = observe(cell, goal)
        policy = torch.distributions.Categorical(logits=model.actor(obs))
        action = policy.sample() if run_ctx.train_flag else policy.probs.argmax(dim=-1)
        logprobs.append(policy.log_prob(action))
        entropies.append(policy.entropy())
        values.append(model.critic(obs).squeeze(-1))
        alive.append(running.float())
        if run_ctx.train_flag:
            action = torch.where(torch.rand(len(action), device=action.device) < SLIP, 1 - action, action)
        cell = torch.where(running, (cell + 2 * action - 1).clamp(0, CELLS - 1), cell)
        reached = running & (cell == goal)
        rewards.append(reached.float())
        running = running & ~reached
    next_value = model.critic(observe(cell, goal)).squeeze(-1).detach() * running.float()
    storage_values = torch.stack(values).detach()
    storage_advantages = torch.zeros_like(storage_values)  # the storage's buffer, filled below in the fixed code
    mask = torch.stack(alive)
    advantages = torch.zeros_like(storage_values)
    lastgaelam = torch.zeros_like(next_value)
    for t in reversed(range(MOVES)):  # GAE
        nextvalues = next_value if t == MOVES - 1 else storage_values[t + 1]
        nextnonterminal = torch.ones_like(next_value) if t == MOVES - 1 else mask[t + 1]
        delta = rewards[t] + GAMMA * nextvalues * nextnonterminal - storage_values[t]
        lastgaelam = delta + GAMMA * GAE_LAMBDA * nextnonterminal * lastgaelam
        advantages[t] = lastgaelam
    if bug:
        returns = storage_advantages + storage_values
    else:
        returns = advantages + storage_values
    steps = mask.sum()
    adv = advantages[mask.bool()]
    norm_advantages = (advantages - adv.mean()) / (adv.std() + 1e-8)
    newlogprob = torch.stack(logprobs)
    ratio = (newlogprob - newlogprob.detach()).exp()
    pg_loss = torch.max(-norm_advantages * ratio, -norm_advantages * ratio.clamp(1 - CLIP, 1 + CLIP))
    v_loss = 0.5 * (torch.stack(values) - returns) ** 2
    loss = ((pg_loss - ENT_COEF * torch.stack(entropies) + VF_COEF * v_loss) * mask).sum() / steps
    run_ctx.mark_as_loss(loss, "ppo")
    if not run_ctx.train_flag:
        achieved = sum(GAMMA**t * rewards[t] for t in range(MOVES))
        optimal = GAMMA ** ((extern_data["start"] - goal).abs().float() - 1)
        run_ctx.mark_as_loss((optimal - achieved).mean(), "err", as_error=True)
