# Actor-critic on a toy task: walk a corridor of 8 cells to a goal cell, one step left or right at a time.
#
#   python rnn.py configs/actor_critic_corridor.py
#
# Each sequence of the dataset is an episode's start: the agent's cell and the goal's. train_step plays the
# episodes of its batch in the corridor (reward 1 on reaching the goal, discount 0.9, at most 12 moves) and marks
# two losses for two optimizers: the critic's value regression trains the critic only, the actor's policy
# gradient (advantage: return minus the critic's value) trains the actor only. The dev score 'regret' is the
# optimal discounted return minus the one the greedy policy gets: 0.40 for a policy that always walks one way,
# 0 for the shortest walks. See docs/several_optimizers.rst.
import numpy as np
import torch
from torch import nn

from framework import run_output_dir

CELLS, MOVES, DISCOUNT, ENTROPY = 8, 12, 0.9, 0.01


def episodes(num: int, seed: int) -> dict[str, np.ndarray]:
    """``num`` (start, goal) pairs with the start away from the goal."""
    rng = np.random.default_rng(seed)
    goal = rng.integers(0, CELLS, num)
    start = (goal + rng.integers(1, CELLS, num)) % CELLS
    return {"start": start.astype(np.int64), "goal": goal.astype(np.int64)}


task = "train"
train = {"class": "NumpyDataset", "arrays": episodes(2048, seed=1)}
dev = {"class": "NumpyDataset", "arrays": episodes(1024, seed=2), "seq_ordering": "sorted"}
extern_data = {
    "start": {"shape": (), "dtype": "int64", "sparse_dim": CELLS},
    "goal": {"shape": (), "dtype": "int64", "sparse_dim": CELLS},
}
batch_size = 128
num_epochs = 8
learning_rate = 3e-3
optimizers = {
    "actor": {"class": "adam", "params": "actor.*"},
    "critic": {"class": "adam", "params": "critic.*", "learning_rate": 1e-2},
}
output_dir = run_output_dir()  # output/actor_critic_corridor
model = output_dir + "/model"
log_verbosity = 4


class ActorCritic(nn.Module):
    def __init__(self):
        super().__init__()
        self.actor = nn.Sequential(nn.Linear(2 * CELLS, 64), nn.Tanh(), nn.Linear(64, 2))
        self.critic = nn.Sequential(nn.Linear(2 * CELLS, 64), nn.Tanh(), nn.Linear(64, 1))


def get_model(*, epoch, step, **_kwargs):
    return ActorCritic()


def observe(cell: torch.Tensor, goal: torch.Tensor) -> torch.Tensor:
    one_hot = nn.functional.one_hot
    return torch.cat([one_hot(cell, CELLS), one_hot(goal, CELLS)], dim=-1).float()


def train_step(*, model, extern_data, run_ctx, **_kwargs):
    cell, goal = extern_data["start"], extern_data["goal"]
    running = torch.ones_like(cell, dtype=torch.bool)
    log_probs, values, rewards, alive, entropies = [], [], [], [], []
    for _ in range(MOVES):
        obs = observe(cell, goal)
        policy = torch.distributions.Categorical(logits=model.actor(obs))
        move = policy.sample() if run_ctx.train_flag else policy.probs.argmax(dim=-1)
        log_probs.append(policy.log_prob(move))
        entropies.append(policy.entropy())
        values.append(model.critic(obs).squeeze(-1))
        alive.append(running)
        cell = (cell + 2 * move - 1).clamp(0, CELLS - 1)
        reached = running & (cell == goal)
        rewards.append(reached.float())
        running = running & ~reached
    returns, future = [], torch.zeros_like(rewards[0])
    for reward, was_alive in zip(reversed(rewards), reversed(alive), strict=True):
        future = (reward + DISCOUNT * future) * was_alive
        returns.append(future)
    returns = torch.stack(returns[::-1])  # [moves, batch]
    mask = torch.stack(alive).float()
    steps = mask.sum()
    values = torch.stack(values)
    advantage = (returns - values).detach()
    actor_loss = -(torch.stack(log_probs) * advantage + ENTROPY * torch.stack(entropies)) * mask
    run_ctx.mark_as_loss(actor_loss.sum() / steps, "actor", optimizer="actor")
    run_ctx.mark_as_loss(((values - returns) ** 2 * mask).sum() / steps, "critic", optimizer="critic")
    if not run_ctx.train_flag:
        optimal = DISCOUNT ** ((extern_data["start"] - goal).abs().float() - 1)
        run_ctx.mark_as_loss((optimal - returns[0]).mean(), "regret", as_error=True)
