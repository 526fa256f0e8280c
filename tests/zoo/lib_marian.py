# Library zoo: a healthy tiny Hugging Face MarianMTModel (random init) learning to reverse token sequences.
# Marian's sinusoidal position tables are parameters created with requires_grad=False: constants by design.
import numpy as np
import torch
import transformers

transformers.logging.set_verbosity_error()
_rng = np.random.default_rng(0)
_seqs = [_rng.integers(3, 32, _rng.integers(4, 12)) for _ in range(96)]
train = {"class": "NumpyDataset", "arrays": {"data": _seqs[:64]}, "sparse_dims": {"data": 32}}
dev = {"class": "NumpyDataset", "arrays": {"data": _seqs[64:]}, "sparse_dims": {"data": 32}}
extern_data = {"data": {"shape": (None,), "dtype": "int64", "sparse_dim": 32}}
batch_size = 400
max_seqs = 16
num_epochs = 2
optimizer = {"class": "adamw", "weight_decay": 0.01}
learning_rate = 1e-3


def get_model(*, epoch, step, **_kwargs):
    config = transformers.MarianConfig(
        vocab_size=32,
        d_model=32,
        encoder_layers=1,
        decoder_layers=1,
        encoder_attention_heads=4,
        decoder_attention_heads=4,
        encoder_ffn_dim=64,
        decoder_ffn_dim=64,
        max_position_embeddings=32,
        pad_token_id=0,
        decoder_start_token_id=0,
        eos_token_id=2,
    )
    return transformers.MarianMTModel(config)


def train_step(*, model, extern_data, run_ctx, **_kwargs):
    tokens, lengths = extern_data["data"], extern_data["data:seq_len"]
    mask = torch.arange(tokens.shape[1], device=tokens.device)[None, :] < lengths.to(tokens.device)[:, None]
    reversed_ = torch.stack([torch.cat([s[:n].flip(0), s[n:]]) for s, n in zip(tokens, lengths.tolist(), strict=True)])
    out = model(input_ids=tokens, attention_mask=mask.long(), labels=reversed_.masked_fill(~mask, -100))
    run_ctx.mark_as_loss(name="ce", loss=out.loss)
