# Bug: an optimizer that accumulates gradients on its own (every 4th step() updates). The engine's last
# partial window of each epoch is thrown away, and so is every update the engine asked for in between.
import torch


class AccumulatingAdam(torch.optim.Adam):
    def __init__(self, params, lr, every=4, **kwargs):
        super().__init__(params, lr=lr, **kwargs)
        self.every, self.calls = every, 0

    def step(self, closure=None):
        self.calls += 1
        if self.calls % self.every == 0:
            return super().step(closure)
        return None

    def zero_grad(self, set_to_none=True):
        if self.calls % self.every == 0:
            super().zero_grad(set_to_none)


optimizer = {"class": AccumulatingAdam}
