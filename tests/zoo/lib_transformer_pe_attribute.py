# Bug: the positional encodings kept in a plain tensor attribute instead of a registered buffer:
# model.to(device) does not move them, so on a GPU they stay on the CPU.
class PositionalEncoding(PositionalEncoding):
    def __init__(self, d_model, max_len=512):
        super().__init__(d_model, max_len)
        pe = self.pe
        del self.pe
        self.pe = pe
