# Corpus bug (astariul/encode-attend-navigate-pytorch#2): the policy loss weights the episode's log-probability by
# (reward - critic prediction) without stopping the prediction's gradient, and actor and critic losses are
# backpropagated together, so the critic is trained by the policy loss as well as by its regression onto the
# returns. Task: episodes in a corridor of 10 cells (start and goal from the dataset, a step left or right, reward 1
# on reaching the goal, discount 0.9, at most 16 moves); the critic predicts the episode's discounted return from the
# start, as the baseline of a REINFORCE-style policy loss. Actor and critic each have their own Adam; the bug marks
# the policy loss for both of them (the source summed both losses into one backward pass). The error 'err' is the
# regret of the greedy policy on dev (the optimal discounted return minus the one it gets). Twin: ++bug False (the
# prediction detached in the policy loss, which trains the actor only).
import numpy as np
import torch
from torch import nn

bug = True
CELLS, MOVES, DISCOUNT = 10, 16, 0.9


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
optimizers = {"actor": {"class": "adam", "params": "actor.*"}, "critic": {"class": "adam", "params": "critic.*"}}


class ActorCritic(nn.Module):
    def __init__(self):
        super().__init__()
        self.actor = nn.Sequential(nn.Linear(2 * CELLS, 64), nn.ReLU(), nn.Linear(64, 2))
        self.critic = nn.Sequential(nn.Linear(2 * CELLS, 64), nn.ReLU(), nn.Linear(64, 1))


def get_model(**_kwargs):
    return ActorCritic()


def observe(cell, goal):
    return torch.cat([nn.functional.one_hot(cell, CELLS), nn.functional.one_hot(goal, CELLS)], dim=-1).float()


def train_step(*, model, extern_data, run_ctx, **_kwargs):
    start, goal = extern_data["start"], extern_data["goal"]
    cell, running = start, torch.ones_like(start, dtype=torch.bool)
    log_prob = torch.zeros(len(start), device=start.device)
    episode_return = torch.zeros(len(start), device=start.device)
    for move_index in range(MOVES):
        policy = torch.distributions.Categorical(logits=model.actor(observe(cell, goal)))
        move = policy.sample() if run_ctx.train_flag else policy.probs.argmax(dim=-1)
        log_prob = log_prob + policy.log_prob(move) * running
        cell = torch.where(running, (cell + 2 * move - 1).clamp(0, CELLS - 1), cell)
        reached = running & (cell == goal)
        episode_return = episode_return + reached.float() * DISCOUNT**move_index
        running = running & ~reached
    prediction = model.critic(observe(start, goal)).squeeze(-1)
    baseline = prediction if bug else prediction.detach()
    policy_loss = -((episode_return - baseline) * log_prob).mean()
    run_ctx.mark_as_loss(policy_loss, "policy", optimizer=("actor", "critic") if bug else "actor")
    run_ctx.mark_as_loss(nn.functional.mse_loss(prediction, episode_return), "critic", optimizer="critic")
    if not run_ctx.train_flag:
        optimal = DISCOUNT ** ((start - goal).abs().float() - 1)
        run_ctx.mark_as_loss((optimal - episode_return).mean(), "err", as_error=True)
