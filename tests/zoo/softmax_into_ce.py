# Bug: the model ends in softmax, and its probabilities go into cross_entropy (which wants logits).
from torch import nn


def get_model(*, epoch, step, **_kwargs):
    return nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Linear(32, 4), nn.Softmax(dim=1))
