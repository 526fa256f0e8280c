# Zoo base: a healthy sequence labeller (12AX, variable lengths, an LSTM, cross-entropy over the real
# frames only, normalized by their number).
import torch
from torch import nn

extern_data = {
    "data": {"shape": (None,), "dtype": "int64", "sparse_dim": 9},
    "classes": {"shape": (None,), "dtype": "int64", "sparse_dim": 2},
}
train = {"class": "Task12AXDataset", "num_seqs": 300}
dev = {"class": "Task12AXDataset", "num_seqs": 50, "fixed_random_seed": 2}
batch_size = 600
max_seqs = 20
num_epochs = 1
optimizer = {"class": "adam"}
learning_rate = 1e-2


class Tagger(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(9, 16)
        self.lstm = nn.LSTM(16, 32, batch_first=True)
        self.output = nn.Linear(32, 2)

    def forward(self, symbols):
        return self.output(self.lstm(self.embed(symbols))[0])


def get_model(*, epoch, step, **_kwargs):
    return Tagger()


def train_step(*, model, extern_data, run_ctx, **_kwargs):
    logits = model(extern_data["data"])
    targets, lengths = extern_data["classes"], extern_data["classes:seq_len"]
    mask = torch.arange(targets.shape[1], device=targets.device)[None, :] < lengths.to(targets.device)[:, None]
    run_ctx.mark_as_loss(name="ce", loss=nn.functional.cross_entropy(logits[mask], targets[mask]))
