# 12AX with an LSTM: RETURNN's classic toy task for sequence models.
#
#   python rnn.py configs/task12ax_lstm.py
#
# Input: variable-length symbol sequences over "123ABCXYZ"; target per frame: 1 iff the frame
# closes the pattern chosen by the last digit (1: A then X, 2: B then Y). Solving it needs memory
# of the last digit, so a feed-forward model cannot; an LSTM gets the frame error rate near 0.
# Shows the variable-length conventions: extern_data["data:seq_len"] holds the lengths, losses
# are sums over valid frames normalized with custom_inv_norm_factor (RETURNN's convention),
# computed without a host sync (no boolean-mask indexing), and "laplace:.N" seq ordering
# (buckets of N sequences) groups similar lengths to save padding.
import torch
from torch import nn

from framework import run_output_dir

task = "train"
extern_data = {
    "data": {"shape": (None,), "dtype": "int64", "sparse_dim": 9},
    "classes": {"shape": (None,), "dtype": "int64", "sparse_dim": 2},
}
train = {"class": "Task12AXDataset", "num_seqs": 1000, "seq_ordering": "laplace:.100"}
dev = {"class": "Task12AXDataset", "num_seqs": 200, "fixed_random_seed": 2}
batch_size = 1000  # padded frames per batch
max_seqs = 40
num_epochs = 8
optimizer = {"class": "adam", "epsilon": 1e-8}
learning_rate = 1e-2
gradient_clip_global_norm = 5.0
learning_rate_control = "newbob"
output_dir = run_output_dir()  # output/task12ax_lstm
model = output_dir + "/model"
log_verbosity = 4

hidden_dim = 32


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(9, 16)
        self.lstm = nn.LSTM(16, hidden_dim, batch_first=True)
        self.output = nn.Linear(hidden_dim, 2)

    def forward(self, symbols):
        hidden, _ = self.lstm(self.embed(symbols))
        return self.output(hidden)


def get_model(*, epoch, step, **_kwargs):
    return Model()


def train_step(*, model, extern_data, run_ctx, **_kwargs):
    logits = model(extern_data["data"])
    targets = extern_data["classes"]
    lengths = extern_data["classes:seq_len"]
    mask = torch.arange(targets.shape[1], device=targets.device)[None, :] < lengths.to(targets.device)[:, None]
    frames = mask.sum()
    # Padding frames are left out by ignore_index and the mask's product, not by indexing with the mask
    # (logits[mask]): its size depends on the data, so on a GPU the host would wait for it at each use.
    ce = nn.functional.cross_entropy(logits.transpose(1, 2), targets.masked_fill(~mask, -100), reduction="sum")
    errors = ((logits.argmax(-1) != targets) & mask).sum().float()
    run_ctx.mark_as_loss(name="ce", loss=ce, custom_inv_norm_factor=frames)
    run_ctx.mark_as_loss(name="fer", loss=errors, custom_inv_norm_factor=frames, as_error=True)


def forward_step(*, model, extern_data, run_ctx, **_kwargs):
    logits = model(extern_data["data"])
    run_ctx.mark_as_output(name="prob_target", tensor=logits.softmax(-1)[..., 1], seq_len=extern_data["data:seq_len"])
