# Bug: a learning rate off by several orders of magnitude (1e-8 typed for 1e-3).
learning_rate = 1e-8
