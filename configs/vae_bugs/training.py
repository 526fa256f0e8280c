# Training bug (DTU exercise): gradients are never zeroed, so every update uses the sum of all
# gradients so far. The engine zeroes them after every update; this optimizer undoes that, as a
# hand-written loop without optimizer.zero_grad() would.
#
#   python rnn.py configs/vae_mnist.py configs/vae_bugs/training.py ++debug_overfit_batches 1


class _NeverZeroGrad(torch.optim.Adam):
    def zero_grad(self, set_to_none=True):
        pass


optimizer = {"class": _NeverZeroGrad}
