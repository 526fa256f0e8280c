# Corpus bug (hsgodhia/hred#2): each example holds two sequences that belong together (an utterance and its reply).
# To pack them for the RNN, the batch is sorted by the utterance's length (utterance and label move together), but
# the reply is sorted by ITS OWN length and never put back, so each utterance is paired with some other example's
# reply. Task: the label is (last token of the utterance + last token of the reply) mod 3, so both are needed.
# Twin: ++bug False (the reply follows the utterance's order; packed without requiring sorted lengths).
import numpy as np
import torch
from torch import nn

from framework.datasets.numpy_dataset import NumpyDataset

bug = True


class Dialogue(NumpyDataset):
    def __init__(self, split, **kwargs):
        rng = np.random.default_rng(0 if split == "train" else 1)
        n = 3000 if split == "train" else 500
        utt = [rng.integers(0, 6, size=t) for t in rng.integers(2, 10, size=n)]
        reply = [rng.integers(0, 6, size=t) for t in rng.integers(2, 10, size=n)]
        labels = np.array([(u[-1] + r[-1]) % 3 for u, r in zip(utt, reply, strict=True)])
        super().__init__(
            {"data": utt, "reply": reply, "classes": labels},
            sparse_dims={"data": 6, "reply": 6, "classes": 3},
            **kwargs,
        )


train = {"class": Dialogue, "split": "train"}
dev = {"class": Dialogue, "split": "dev"}
extern_data = {
    "data": {"shape": (None,), "dtype": "int64", "sparse_dim": 6},
    "reply": {"shape": (None,), "dtype": "int64", "sparse_dim": 6},
    "classes": {"shape": (), "dtype": "int64", "sparse_dim": 3},
}
batch_size = 320
max_seqs = 32
num_epochs = 4
learning_rate = 5e-3


class PairEncoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(6, 16)
        self.utt_rnn = nn.GRU(16, 32, batch_first=True)
        self.reply_rnn = nn.GRU(16, 32, batch_first=True)
        self.out = nn.Sequential(nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 3))

    def encode(self, rnn, tokens, lengths, enforce_sorted):
        packed = nn.utils.rnn.pack_padded_sequence(
            self.embed(tokens), lengths.cpu(), batch_first=True, enforce_sorted=enforce_sorted
        )
        return rnn(packed)[1][0]

    def forward(self, utt, utt_len, reply, reply_len):
        # the collate step: sort by the utterance's length for packing
        order = torch.argsort(utt_len, descending=True)
        if bug:  # the reply gets its own sort, never undone
            reply_order = torch.argsort(reply_len, descending=True)
        else:
            reply_order = order
        h_utt = self.encode(self.utt_rnn, utt[order], utt_len[order], True)
        h_reply = self.encode(self.reply_rnn, reply[reply_order], reply_len[reply_order], bug)
        return self.out(torch.cat([h_utt, h_reply], -1)), order


def get_model(**_kwargs):
    return PairEncoder()


def train_step(*, model, extern_data, run_ctx, **_kwargs):
    logits, order = model(
        extern_data["data"], extern_data["data:seq_len"], extern_data["reply"], extern_data["reply:seq_len"]
    )
    targets = extern_data["classes"][order.to(logits.device)]
    run_ctx.mark_as_loss(name="ce", loss=nn.functional.cross_entropy(logits, targets))
    run_ctx.mark_as_loss(name="err", loss=(logits.argmax(-1) != targets).float().mean(), as_error=True)
