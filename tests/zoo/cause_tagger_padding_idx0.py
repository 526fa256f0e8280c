# Zoo bug, over sequences.py: the tagger's embedding declares padding_idx=0, but 12AX's symbol 0 is a real symbol
# (the batches pad with 0 beyond each sequence's length, which is what the author had in mind).
class Tagger(nn.Module):  # noqa: F821 (sequences.py's)
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(9, 16, padding_idx=0)  # noqa: F821
        self.lstm = nn.LSTM(16, 32, batch_first=True)  # noqa: F821
        self.output = nn.Linear(32, 2)  # noqa: F821

    def forward(self, symbols):
        return self.output(self.lstm(self.embed(symbols))[0])
