# Math bug (DTU exercise): the log-variance is used as if it were the standard deviation.
# Nothing crashes and the loss goes down: see docs/debugging.rst for what shows it.


class Encoder(Encoder):  # noqa: F821 (defined by configs/vae_mnist.py, loaded first)
    def reparameterize(self, mean, log_var):
        return mean + log_var * torch.randn_like(log_var)  # noqa: F821
