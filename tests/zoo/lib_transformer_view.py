# Bug: view() where a transpose was meant: the embedded [B, T, F] viewed as [T, B, F] interleaves sequences.
import math


class Tagger(Tagger):
    def forward(self, symbols, padding):
        batch, time = symbols.shape
        x = self.embed(symbols).view(time, batch, -1) * math.sqrt(self.embed.embedding_dim)
        return self.output(self.encode(self.pos(x), padding)).transpose(0, 1)
