# Healthy corpus: transformers' DistilBertForSequenceClassification from a tiny config (no download) on padded token
# sequences with attention masks: is keyword 3 present in the sequence.
import numpy as np
import torch
from torch import nn

from framework.datasets.numpy_dataset import NumpyDataset

VOCAB, PAD = 20, 0


class Keyword(NumpyDataset):
    def __init__(self, split, **kwargs):
        rng = np.random.default_rng(0 if split == "train" else 1)
        seqs = [rng.integers(4, VOCAB, size=rng.integers(4, 16)) for _ in range(2000 if split == "train" else 300)]
        labels = rng.integers(0, 2, size=len(seqs))
        for seq, label in zip(seqs, labels, strict=True):
            if label:
                seq[rng.integers(0, len(seq))] = 3
        super().__init__({"data": seqs, "classes": labels}, sparse_dims={"data": VOCAB, "classes": 2}, **kwargs)


train = {"class": Keyword, "split": "train"}
dev = {"class": Keyword, "split": "dev"}
extern_data = {
    "data": {"shape": (None,), "dtype": "int64", "sparse_dim": VOCAB},
    "classes": {"shape": (), "dtype": "int64", "sparse_dim": 2},
}
batch_size = 400
max_seqs = 32
num_epochs = 2
learning_rate = 1e-3


def get_model(**_kwargs):
    from transformers import DistilBertConfig, DistilBertForSequenceClassification

    config = DistilBertConfig(
        vocab_size=VOCAB,
        dim=32,
        hidden_dim=64,
        n_layers=2,
        n_heads=2,
        max_position_embeddings=32,
        pad_token_id=PAD,
        num_labels=2,
    )
    return DistilBertForSequenceClassification(config)


def train_step(*, model, extern_data, run_ctx, **_kwargs):
    tokens = extern_data["data"]
    lengths = extern_data["data:seq_len"].to(tokens.device)
    mask = torch.arange(tokens.shape[1], device=tokens.device)[None, :] < lengths[:, None]
    logits = model(input_ids=tokens, attention_mask=mask.long()).logits
    targets = extern_data["classes"]
    run_ctx.mark_as_loss(name="ce", loss=nn.functional.cross_entropy(logits, targets))
    run_ctx.mark_as_loss(name="err", loss=(logits.argmax(-1) != targets).float().mean(), as_error=True)
