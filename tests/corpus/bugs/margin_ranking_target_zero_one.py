# Corpus bug (seathiefwang/RankPose#4): nn.MarginRankingLoss computes max(0, -y*(x1-x2) + margin) and expects
# y in {1, -1}, but the pairwise labels are 0/1 ("is the first image's yaw larger"): a pair labelled 0 costs the
# constant margin with no gradient, so only the pairs labelled 1 train. Task: RankPose's setting in small: pairs of
# 32-dim face descriptors whose yaw is a nonlinear function of the descriptor; a shared MLP scores each image and the
# score's order should follow the yaw; 400 training pairs. The error is the share of dev pairs put in
# the wrong order. Twin: ++bug False (targets 2 * label - 1).
import numpy as np
from torch import nn

from framework.datasets.numpy_dataset import NumpyDataset

bug = True
DIM, MARGIN = 32, 0.5
DIRECTION = np.random.default_rng(8).normal(size=DIM)


def yaw(x):
    return np.tanh(x @ DIRECTION / np.sqrt(DIM) * 1.5) * 90


class FacePairs(NumpyDataset):
    def __init__(self, split, **kwargs):
        rng = np.random.default_rng(0 if split == "train" else 1)
        n = 400 if split == "train" else 1000
        a, b = rng.normal(size=(n, DIM)), rng.normal(size=(n, DIM))
        label = (yaw(a) > yaw(b)).astype(np.float32)  # 1: the first face is turned further
        super().__init__({"a": a.astype(np.float32), "b": b.astype(np.float32), "label": label}, **kwargs)


train = {"class": FacePairs, "split": "train"}
dev = {"class": FacePairs, "split": "dev"}
extern_data = {"a": {"shape": (DIM,)}, "b": {"shape": (DIM,)}, "label": {"shape": ()}}
batch_size = 32
num_epochs = 8
learning_rate = 1e-3


def get_model(**_kwargs):
    return nn.Sequential(nn.Linear(DIM, 64), nn.ReLU(), nn.Linear(64, 1))


def train_step(*, model, extern_data, run_ctx, **_kwargs):
    s1, s2 = model(extern_data["a"]).squeeze(-1), model(extern_data["b"]).squeeze(-1)
    label = extern_data["label"]
    target = label if bug else 2 * label - 1
    run_ctx.mark_as_loss(name="rank", loss=nn.functional.margin_ranking_loss(s1, s2, target, margin=MARGIN))
    run_ctx.mark_as_loss(name="err", loss=((s1 > s2).float() != label).float().mean(), as_error=True)
