# Bug: an optimizer subclass whose zero_grad forgets to clear (meant to log something, returns early).
import torch


class LoggingAdam(torch.optim.Adam):
    def zero_grad(self, set_to_none=True):
        return None


optimizer = {"class": LoggingAdam}
