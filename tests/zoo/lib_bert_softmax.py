# Bug: the classifier's probabilities fed to cross_entropy, through the library's ModelOutput.
from torch import nn


def loss_of(logits, targets):
    return nn.functional.cross_entropy(logits.softmax(-1), targets)
