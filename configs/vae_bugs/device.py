# Device bug (DTU exercise): the noise is created on the CPU whatever device the model is on.
# On a GPU: "Expected all tensors to be on the same device". On a CPU-only machine it is silent;
# ++debug_print_layer_output_template True finds it anyway (docs/debugging.rst).


class Encoder(Encoder):  # noqa: F821 (defined by configs/vae_mnist.py, loaded first)
    def reparameterize(self, mean, log_var):
        epsilon = torch.randn(*log_var.shape)  # noqa: F821
        return mean + torch.exp(0.5 * log_var) * epsilon  # noqa: F821
