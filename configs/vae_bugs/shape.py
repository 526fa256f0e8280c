# Shape bug (DTU exercise): the decoder's output layer is built for the latent size instead of the
# hidden size, so "mat1 and mat2 shapes cannot be multiplied" in the first forward pass.
#
#   python rnn.py configs/vae_mnist.py configs/vae_bugs/shape.py


class Decoder(Decoder):
    def __init__(self):
        super().__init__()
        self.out = nn.Linear(latent_dim, 784)
