# Zoo base (issue 41): a healthy tiny Hugging Face BERT classifier (BertForSequenceClassification from a
# small BertConfig) on variable-length token sequences, long enough for the learning watch to judge two
# epochs. Padding id 0; the attention mask comes from the lengths. The label: does token 5 occur.
import numpy as np
import torch
import transformers
from torch import nn

transformers.logging.set_verbosity_error()

_rng = np.random.default_rng(1)
_seqs = [np.concatenate([[1], _rng.integers(6, 32, n)]) for n in _rng.integers(3, 12, 640)]  # [CLS] first
for _s in _seqs[::2]:
    _s[_rng.integers(1, len(_s))] = 5
_labels = np.array([int(5 in s) for s in _seqs])
_sparse = {"data": 32, "classes": 2}
train = {"class": "NumpyDataset", "arrays": {"data": _seqs[:512], "classes": _labels[:512]}, "sparse_dims": _sparse}
dev = {"class": "NumpyDataset", "arrays": {"data": _seqs[512:], "classes": _labels[512:]}, "sparse_dims": _sparse}
extern_data = {
    "data": {"shape": (None,), "dtype": "int64", "sparse_dim": 32},
    "classes": {"shape": (), "dtype": "int64", "sparse_dim": 2},
}
batch_size = 400
max_seqs = 32
num_epochs = 2
optimizer = {"class": "adamw"}
learning_rate = 2e-3


def get_model(*, epoch, step, **_kwargs):
    config = transformers.BertConfig(
        vocab_size=32,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=16,
        num_labels=2,
    )
    return transformers.BertForSequenceClassification(config)


def attention_mask(tokens, lengths):
    return (torch.arange(tokens.shape[1], device=tokens.device)[None, :] < lengths.to(tokens.device)[:, None]).long()


def train_step(*, model, extern_data, run_ctx, **_kwargs):
    tokens, lengths = extern_data["data"], extern_data["data:seq_len"]
    logits = model(input_ids=tokens, attention_mask=attention_mask(tokens, lengths)).logits
    targets = extern_data["classes"]
    run_ctx.mark_as_loss(name="ce", loss=nn.functional.cross_entropy(logits, targets))
    run_ctx.mark_as_loss(name="fer", loss=(logits.argmax(-1) != targets).float().mean(), as_error=True)
