# Library zoo: a healthy tiny Hugging Face GPT-2 language model (GPT2LMHeadModel from a small
# GPT2Config, random init) on variable-length token sequences, padded in batches: the attention
# mask comes from the :seq_len lengths and the padded labels are -100, which the model's loss ignores.
import numpy as np
import torch
import transformers

transformers.logging.set_verbosity_error()

_rng = np.random.default_rng(0)
_kinds = _rng.choice(31 * 3 * 9, size=96, replace=False)  # (start, stride, length), no sequence twice
_seqs = [(k % 31 + (k // 31 % 3 + 1) * np.arange(k // 93 + 4)) % 31 + 1 for k in _kinds]  # 0 is the padding id
train = {"class": "NumpyDataset", "arrays": {"data": _seqs[:64]}, "sparse_dims": {"data": 32}}
dev = {"class": "NumpyDataset", "arrays": {"data": _seqs[64:]}, "sparse_dims": {"data": 32}}
extern_data = {"data": {"shape": (None,), "dtype": "int64", "sparse_dim": 32}}
batch_size = 200
max_seqs = 16
num_epochs = 1
optimizer = {"class": "adamw"}
learning_rate = 3e-3


def get_model(*, epoch, step, **_kwargs):
    config = transformers.GPT2Config(vocab_size=32, n_positions=16, n_embd=32, n_layer=2, n_head=2)
    return transformers.GPT2LMHeadModel(config)


def labels_of(tokens, mask):
    return tokens.masked_fill(~mask, -100)


def train_step(*, model, extern_data, run_ctx, **_kwargs):
    tokens, lengths = extern_data["data"], extern_data["data:seq_len"]
    mask = torch.arange(tokens.shape[1], device=tokens.device)[None, :] < lengths.to(tokens.device)[:, None]
    out = model(input_ids=tokens, attention_mask=mask.long(), labels=labels_of(tokens, mask))
    run_ctx.mark_as_loss(name="ce", loss=out.loss)
