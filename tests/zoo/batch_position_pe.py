# Zoo bug (after cmu-l3/anlp-fall2025-code#1, written anew): the sinusoidal positions of a batch-major tagger are
# taken along the batch axis (x.size(0)), so every frame of a sequence gets the encoding of the sequence's index in
# its batch. ++positions_from_batch_axis False is the healthy twin (positions along time).
import math

import torch
from torch import nn

positions_from_batch_axis = True
WIDTH = 16


def sinusoids(count, device):
    rates = torch.exp(torch.arange(0, WIDTH, 2, device=device) * (-math.log(10000.0) / WIDTH))
    angles = torch.arange(count, device=device)[:, None].float() * rates[None, :]
    return torch.stack([angles.sin(), angles.cos()], dim=-1).flatten(1)


class Tagger(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(9, WIDTH)
        self.lstm = nn.LSTM(WIDTH, 32, batch_first=True)
        self.output = nn.Linear(32, 2)

    def forward(self, symbols):
        h = self.embed(symbols)
        if positions_from_batch_axis:
            h = h + sinusoids(h.size(0), h.device)[:, None, :]
        else:
            h = h + sinusoids(h.size(1), h.device)[None, :, :]
        return self.output(self.lstm(h)[0])


def get_model(*, epoch, step, **_kwargs):
    return Tagger()
