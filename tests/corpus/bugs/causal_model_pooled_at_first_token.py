# Corpus bug (salesforce/progen#8): a sequence-prediction head on ProGen2 (a GPT-J causal language model) pools the
# hidden state of the first token, as BERT-style poolers do; in a causal model the first position attends only to
# itself, and every sequence starts with the same token, so the predictions are exactly the same whatever the input.
# Task: classify token sequences (each starting with the BOS token 1, as ProGen2's do) by which of two motif tokens
# occurs more often; a tiny transformers GPTJModel from a config (no download) and a linear head on the pooled hidden
# state. Twin: ++bug False (pool the last position; the sequences have equal length, no padding).
import numpy as np
from torch import nn

from framework.datasets.numpy_dataset import NumpyDataset

bug = True
VOCAB, LENGTH, BOS, MOTIF_A, MOTIF_B = 16, 20, 1, 2, 3


class Sequences(NumpyDataset):
    def __init__(self, split, **kwargs):
        rng = np.random.default_rng(0 if split == "train" else 1)
        n = 1000 if split == "train" else 400
        x = rng.integers(4, VOCAB, size=(n, LENGTH))
        for row in range(n):
            counts = rng.choice([(3, 1), (1, 3), (4, 2), (2, 4)])
            slots = rng.choice(np.arange(1, LENGTH), size=sum(counts), replace=False)
            x[row, slots[: counts[0]]] = MOTIF_A
            x[row, slots[counts[0] :]] = MOTIF_B
        x[:, 0] = BOS
        labels = ((x == MOTIF_A).sum(1) > (x == MOTIF_B).sum(1)).astype(np.int64)
        super().__init__({"data": x, "classes": labels}, sparse_dims={"data": VOCAB, "classes": 2}, **kwargs)


train = {"class": Sequences, "split": "train"}
dev = {"class": Sequences, "split": "dev"}
extern_data = {
    "data": {"shape": (LENGTH,), "dtype": "int64", "sparse_dim": VOCAB},
    "classes": {"shape": (), "dtype": "int64", "sparse_dim": 2},
}
batch_size = 32
num_epochs = 3
learning_rate = 1e-3


class ProGenRegressor(nn.Module):
    def __init__(self):
        super().__init__()
        from transformers import GPTJConfig, GPTJModel

        config = GPTJConfig(
            vocab_size=VOCAB,
            n_positions=LENGTH,
            n_embd=64,
            n_layer=2,
            n_head=4,
            rotary_dim=16,
            bos_token_id=BOS,
            eos_token_id=BOS,
            resid_pdrop=0.0,
            embd_pdrop=0.0,
            attn_pdrop=0.0,
        )
        self.transformer = GPTJModel(config)
        self.head = nn.Linear(64, 2)

    def forward(self, input_ids):
        hidden = self.transformer(input_ids=input_ids).last_hidden_state
        pooled = hidden[:, 0] if bug else hidden[:, -1]  # the first token has attended only to itself
        return self.head(pooled)


def get_model(**_kwargs):
    return ProGenRegressor()


def train_step(*, model, extern_data, run_ctx, **_kwargs):
    logits = model(extern_data["data"])
    targets = extern_data["classes"]
    run_ctx.mark_as_loss(name="ce", loss=nn.functional.cross_entropy(logits, targets))
    run_ctx.mark_as_loss(name="err", loss=(logits.argmax(-1) != targets).float().mean(), as_error=True)
