# Device bug (DTU exercise): the noise is created on the CPU whatever device the model is on.
# On a GPU: "Expected all tensors to be on the same device". On a CPU-only machine it trains; the
# default device check (a dry run on the meta device) finds it anyway (docs/walkthrough_vae.rst):
#
#   python rnn.py configs/vae_mnist.py configs/vae_bugs/device.py
#
# Each file in configs/vae_bugs/ is loaded after configs/vae_mnist.py and redefines one of its names.


class Encoder(Encoder):
    def reparameterize(self, mean, log_var):
        epsilon = torch.randn(*log_var.shape)
        return mean + torch.exp(0.5 * log_var) * epsilon
