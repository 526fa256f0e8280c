# Healthy corpus: masked-language-model pretraining of a tiny Hugging Face BertForMaskedLM, as
# DataCollatorForLanguageModeling masks: 15 % of the real tokens are chosen (80 % of them replaced by [MASK],
# 10 % by a random token, 10 % kept), labels -100 everywhere else. Text: repeating patterns of 3 tokens.
import numpy as np
import torch
import transformers

transformers.logging.set_verbosity_error()

MASK = 3
_rng = np.random.default_rng(0)
_seqs = [np.tile(_rng.integers(5, 32, size=3), 5)[: _rng.integers(6, 15)] for _ in range(1000)]
train = {"class": "NumpyDataset", "arrays": {"data": _seqs[:800]}, "sparse_dims": {"data": 32}}
dev = {"class": "NumpyDataset", "arrays": {"data": _seqs[800:]}, "sparse_dims": {"data": 32}}
extern_data = {"data": {"shape": (None,), "dtype": "int64", "sparse_dim": 32}}
batch_size = 140
max_seqs = 10
num_epochs = 2
optimizer = {"class": "adamw", "weight_decay": 0.01}
learning_rate = 3e-3


def get_model(**_kwargs):
    config = transformers.BertConfig(
        vocab_size=32,
        hidden_size=32,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=16,
    )
    return transformers.BertForMaskedLM(config)


def mask_tokens(tokens, real):
    labels = tokens.clone()
    chosen = (torch.rand(tokens.shape, device=tokens.device) < 0.15) & real
    labels[~chosen] = -100
    inputs = tokens.clone()
    replaced = chosen & (torch.rand(tokens.shape, device=tokens.device) < 0.8)
    inputs[replaced] = MASK
    randomized = chosen & ~replaced & (torch.rand(tokens.shape, device=tokens.device) < 0.5)
    inputs[randomized] = torch.randint(5, 32, tokens.shape, device=tokens.device)[randomized]
    return inputs, labels


def train_step(*, model, extern_data, run_ctx, **_kwargs):
    tokens, lengths = extern_data["data"], extern_data["data:seq_len"]
    real = torch.arange(tokens.shape[1], device=tokens.device)[None, :] < lengths.to(tokens.device)[:, None]
    inputs, labels = mask_tokens(tokens, real)
    out = model(input_ids=inputs, attention_mask=real.long(), labels=labels)
    run_ctx.mark_as_loss(name="mlm", loss=out.loss)
