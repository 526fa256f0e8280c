# Bug: view() where a transpose was meant: [B, T, F] becomes a [T, B, F] that interleaves sequences.
class Pooler(Pooler):
    def encode(self, x):
        batch, time, features = x.shape
        return self.rnn(x.view(time, batch, features))[0].view(batch, time, -1)
