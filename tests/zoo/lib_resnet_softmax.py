# Bug: the network's probabilities fed to cross_entropy.
from torch import nn


def loss_of(logits, targets):
    return nn.functional.cross_entropy(nn.functional.softmax(logits, dim=1), targets)
