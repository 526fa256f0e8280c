# Healthy corpus: a causal transformer used as a classifier through the hidden state of its last position, as
# transformers' GPT2ForSequenceClassification does (the only position that has attended to the whole sequence). Task:
# which of two motif tokens occurs more often in a sequence of equal length; a tiny GPT2Model from a config (no
# download) and a linear head on the last position's hidden state.
import numpy as np
from torch import nn

from framework.datasets.numpy_dataset import NumpyDataset

VOCAB, LENGTH, MOTIF_A, MOTIF_B = 16, 20, 2, 3


class Sequences(NumpyDataset):
    def __init__(self, split, **kwargs):
        rng = np.random.default_rng(0 if split == "train" else 1)
        n = 2000 if split == "train" else 400
        x = rng.integers(4, VOCAB, size=(n, LENGTH))
        for row in range(n):
            counts = rng.choice([(3, 1), (1, 3), (4, 2), (2, 4)])
            slots = rng.choice(LENGTH, size=sum(counts), replace=False)
            x[row, slots[: counts[0]]] = MOTIF_A
            x[row, slots[counts[0] :]] = MOTIF_B
        labels = ((x == MOTIF_A).sum(1) > (x == MOTIF_B).sum(1)).astype(np.int64)
        super().__init__({"data": x, "classes": labels}, sparse_dims={"data": VOCAB, "classes": 2}, **kwargs)


train = {"class": Sequences, "split": "train"}
dev = {"class": Sequences, "split": "dev"}
extern_data = {
    "data": {"shape": (LENGTH,), "dtype": "int64", "sparse_dim": VOCAB},
    "classes": {"shape": (), "dtype": "int64", "sparse_dim": 2},
}
batch_size = 32
num_epochs = 4
learning_rate = 1e-3


class LastTokenClassifier(nn.Module):
    def __init__(self):
        super().__init__()
        from transformers import GPT2Config, GPT2Model

        config = GPT2Config(
            vocab_size=VOCAB,
            n_positions=LENGTH,
            n_embd=64,
            n_layer=2,
            n_head=4,
            resid_pdrop=0.0,
            embd_pdrop=0.0,
            attn_pdrop=0.0,
        )
        self.transformer = GPT2Model(config)
        self.score = nn.Linear(64, 2)

    def forward(self, input_ids):
        return self.score(self.transformer(input_ids=input_ids).last_hidden_state[:, -1])


def get_model(**_kwargs):
    return LastTokenClassifier()


def train_step(*, model, extern_data, run_ctx, **_kwargs):
    logits = model(extern_data["data"])
    targets = extern_data["classes"]
    run_ctx.mark_as_loss(name="ce", loss=nn.functional.cross_entropy(logits, targets))
    run_ctx.mark_as_loss(name="err", loss=(logits.argmax(-1) != targets).float().mean(), as_error=True)
