# Corpus bug (hungpthanh/GRU4REC-pytorch#7): the evaluation loop initialises the GRU's hidden state once and then feeds
# each batch's final hidden state into the next batch, so every evaluated session starts from the state of an
# unrelated earlier session, while training starts each batch of new sessions from a zero state. Task: sessions of 6
# item clicks over 40 items in which the user browses 3 items and then revisits them in the same order; a GRU4Rec-style
# model (item embedding, GRU, scores over all items) predicts each next click; the error is the dev share of wrong
# top-1 predictions of the revisits (the first three clicks cannot be predicted). Twin: ++bug False (the hidden state reset for every batch of new sessions).
import numpy as np
import torch
from torch import nn

from framework.datasets.numpy_dataset import NumpyDataset

bug = True
ITEMS, CLICKS, HIDDEN = 40, 6, 64
_eval = {}


class Sessions(NumpyDataset):
    def __init__(self, split, **kwargs):
        rng = np.random.default_rng(0 if split == "train" else 1)
        sessions = []
        for _ in range(4000 if split == "train" else 800):
            browsed = rng.choice(ITEMS, size=CLICKS // 2, replace=False)
            sessions.append(np.concatenate([browsed, browsed]))
        super().__init__({"data": np.array(sessions, dtype=np.int64)}, sparse_dims={"data": ITEMS}, **kwargs)


train = {"class": Sessions, "split": "train"}
dev = {"class": Sessions, "split": "dev"}
extern_data = {"data": {"shape": (CLICKS,), "dtype": "int64", "sparse_dim": ITEMS}}
batch_size = 50
num_epochs = 3
learning_rate = 3e-3


class GRU4Rec(nn.Module):
    def __init__(self):
        super().__init__()
        self.embedding = nn.Embedding(ITEMS, 64)
        self.gru = nn.GRU(64, HIDDEN, batch_first=True)
        self.scores = nn.Linear(HIDDEN, ITEMS)

    def init_hidden(self, batch):
        return torch.zeros(1, batch, HIDDEN, device=self.scores.weight.device)

    def forward(self, clicks, hidden):
        output, hidden = self.gru(self.embedding(clicks), hidden)
        return self.scores(output), hidden


def get_model(**_kwargs):
    return GRU4Rec()


def train_step(*, model, extern_data, run_ctx, **_kwargs):
    clicks = extern_data["data"]
    inputs, targets = clicks[:, :-1], clicks[:, 1:]
    batch = len(clicks)
    if run_ctx.train_flag or not bug:
        hidden = model.init_hidden(batch)
    else:  # the evaluation loop: hidden = model.init_hidden() once, then carried from batch to batch
        hidden = _eval.get("hidden")
        if hidden is None or hidden.shape[1] < batch:
            hidden = model.init_hidden(batch)
        hidden = hidden[:, :batch]
    logits, hidden = model(inputs, hidden)
    if not run_ctx.train_flag:
        _eval["hidden"] = hidden.detach()
    run_ctx.mark_as_loss(name="ce", loss=nn.functional.cross_entropy(logits.transpose(1, 2), targets))
    revisits = slice(CLICKS // 2 - 1, None)  # the predictions of clicks 4 to 6
    wrong = logits[:, revisits].argmax(-1) != targets[:, revisits]
    run_ctx.mark_as_loss(name="err", loss=wrong.float().mean(), as_error=True)
