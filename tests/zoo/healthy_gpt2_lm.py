# Healthy corpus: causal language modelling with a tiny Hugging Face GPT2LMHeadModel (the run_clm way:
# labels = input_ids, the model shifts them; -100 at the padding; the attention mask from the lengths).
# The sequences are counting sequences with a start and a stride: after two tokens the rest is determined.
import numpy as np
import torch
import transformers

transformers.logging.set_verbosity_error()

_rng = np.random.default_rng(0)
_seqs = [(_rng.integers(0, 31) + _rng.integers(1, 4) * np.arange(_rng.integers(5, 13))) % 31 + 1 for _ in range(1000)]
train = {"class": "NumpyDataset", "arrays": {"data": _seqs[:800]}, "sparse_dims": {"data": 32}}
dev = {"class": "NumpyDataset", "arrays": {"data": _seqs[800:]}, "sparse_dims": {"data": 32}}
extern_data = {"data": {"shape": (None,), "dtype": "int64", "sparse_dim": 32}}
batch_size = 120
max_seqs = 10
num_epochs = 2
optimizer = {"class": "adamw", "weight_decay": 0.01}
learning_rate = 3e-3


def get_model(**_kwargs):
    config = transformers.GPT2Config(vocab_size=32, n_positions=16, n_embd=32, n_layer=1, n_head=2)
    return transformers.GPT2LMHeadModel(config)


def train_step(*, model, extern_data, run_ctx, **_kwargs):
    tokens, lengths = extern_data["data"], extern_data["data:seq_len"]
    mask = torch.arange(tokens.shape[1], device=tokens.device)[None, :] < lengths.to(tokens.device)[:, None]
    out = model(input_ids=tokens, attention_mask=mask.long(), labels=tokens.masked_fill(~mask, -100))
    run_ctx.mark_as_loss(name="ce", loss=out.loss)
