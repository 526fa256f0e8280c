# Math bug (DTU exercise): the log-variance is used as if it were the standard deviation.
# Nothing crashes and the loss goes down; docs/walkthrough_vae.rst shows what gives it away.
#
#   python rnn.py configs/vae_mnist.py configs/vae_bugs/math.py


class Encoder(Encoder):
    def reparameterize(self, mean, log_var):
        return mean + log_var * torch.randn_like(log_var)
