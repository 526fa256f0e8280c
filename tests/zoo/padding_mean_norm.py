# Bug (on sequences.py): per-sequence mean normalisation of the features (as speech front ends do per utterance,
# CMVN) computed over the padded batch, x - x.mean(dim=1): the padded frames count in each sequence's mean.
from torch import nn


class NormalisedTagger(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(9, 16)
        self.lstm = nn.LSTM(16, 32, batch_first=True)
        self.output = nn.Linear(32, 2)

    def forward(self, symbols, lengths=None):
        x = self.embed(symbols)
        if lengths is None:
            x = x - x.mean(dim=1, keepdim=True)
        else:  # the twin: the mean over each sequence's real frames
            real = (nn.functional.one_hot(lengths - 1, x.shape[1]).flip(1).cumsum(1).flip(1))[..., None].to(x)
            x = x - (x * real).sum(1, keepdim=True) / real.sum(1, keepdim=True)
        return self.output(self.lstm(x)[0])


def get_model(**_kwargs):
    return NormalisedTagger()
