# Healthy corpus: PPO's clipped surrogate objective on a contextual bandit with 3 arms. A fixed behaviour policy's
# sampled arms, their log-probabilities and the rewards are precomputed in the dataset; the advantage is the reward
# minus the mean reward (the baseline). The loss is -min(ratio * A, clip(ratio, 0.8, 1.2) * A): where the clipped
# branch is the minimum it has zero gradient, by design. The error is the greedy policy's wrong-arm rate.
import numpy as np
import torch
from torch import nn

from framework.datasets.numpy_dataset import NumpyDataset

ARMS, CLIP = 3, 0.2
RULE = np.random.default_rng(9).normal(size=(4, ARMS))
BEHAVIOUR = 0.5 * np.random.default_rng(10).normal(size=(4, ARMS))  # the logging policy's logits per context


class LoggedBandit(NumpyDataset):
    def __init__(self, split, **kwargs):
        rng = np.random.default_rng(0 if split == "train" else 1)
        context = rng.normal(size=(4000 if split == "train" else 500, 4))
        best = (context @ RULE).argmax(-1)
        behaviour = np.exp(context @ BEHAVIOUR)
        behaviour /= behaviour.sum(-1, keepdims=True)
        arm = (rng.random((len(context), 1)) > behaviour.cumsum(-1)).sum(-1).clip(max=ARMS - 1)
        reward = (arm == best).astype(np.float64)
        arrays = {
            "data": context.astype(np.float32),
            "arm": arm,
            "behaviour_log_prob": np.log(behaviour[np.arange(len(arm)), arm]).astype(np.float32),
            "advantage": (reward - reward.mean()).astype(np.float32),
            "best": best,
        }
        super().__init__(arrays, sparse_dims={"arm": ARMS, "best": ARMS}, **kwargs)


train = {"class": LoggedBandit, "split": "train"}
dev = {"class": LoggedBandit, "split": "dev"}
extern_data = {
    "data": {"shape": (4,)},
    "arm": {"shape": (), "dtype": "int64", "sparse_dim": ARMS},
    "behaviour_log_prob": {"shape": (), "dtype": "float32"},
    "advantage": {"shape": (), "dtype": "float32"},
    "best": {"shape": (), "dtype": "int64", "sparse_dim": ARMS},
}
batch_size = 64
num_epochs = 4
learning_rate = 3e-3


def get_model(**_kwargs):
    return nn.Sequential(nn.Linear(4, 32), nn.Tanh(), nn.Linear(32, ARMS))


def train_step(*, model, extern_data, run_ctx, **_kwargs):
    logits = model(extern_data["data"])
    log_prob = logits.log_softmax(-1).gather(1, extern_data["arm"][:, None]).squeeze(1)
    ratio = (log_prob - extern_data["behaviour_log_prob"]).exp()
    advantage = extern_data["advantage"]
    surrogate = torch.minimum(ratio * advantage, ratio.clamp(1 - CLIP, 1 + CLIP) * advantage)
    run_ctx.mark_as_loss(name="ppo", loss=-surrogate.mean())
    run_ctx.mark_as_loss(name="err", loss=(logits.argmax(-1) != extern_data["best"]).float().mean(), as_error=True)
