"""Training features: optimizers, learning rates, mixed precision, compile, checkpoints, run safety."""
