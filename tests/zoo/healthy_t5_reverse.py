# Healthy corpus: seq2seq with a tiny Hugging Face T5ForConditionalGeneration (the run_translation way: the
# target as labels, -100 at its padding, the model shifts them into decoder inputs). Task: reverse the source.
import numpy as np
import torch
import transformers

transformers.logging.set_verbosity_error()

_rng = np.random.default_rng(0)
_src = [_rng.integers(2, 32, size=_rng.integers(3, 9)) for _ in range(1000)]
_tgt = [s[::-1].copy() for s in _src]
train = {
    "class": "NumpyDataset",
    "arrays": {"data": _src[:800], "classes": _tgt[:800]},
    "sparse_dims": {"data": 32, "classes": 32},
}
dev = {
    "class": "NumpyDataset",
    "arrays": {"data": _src[800:], "classes": _tgt[800:]},
    "sparse_dims": {"data": 32, "classes": 32},
}
extern_data = {
    "data": {"shape": (None,), "dtype": "int64", "sparse_dim": 32},
    "classes": {"shape": (None,), "dtype": "int64", "sparse_dim": 32},
}
batch_size = 80
max_seqs = 10
num_epochs = 2
optimizer = {"class": "adamw"}
learning_rate = 3e-3


def get_model(**_kwargs):
    config = transformers.T5Config(
        vocab_size=32,
        d_model=32,
        d_kv=16,
        d_ff=64,
        num_layers=1,
        num_heads=2,
        decoder_start_token_id=0,
        pad_token_id=0,
    )
    return transformers.T5ForConditionalGeneration(config)


def _mask(values, lengths):
    return torch.arange(values.shape[1], device=values.device)[None, :] < lengths.to(values.device)[:, None]


def train_step(*, model, extern_data, run_ctx, **_kwargs):
    src, tgt = extern_data["data"], extern_data["classes"]
    src_mask, tgt_mask = _mask(src, extern_data["data:seq_len"]), _mask(tgt, extern_data["classes:seq_len"])
    out = model(input_ids=src, attention_mask=src_mask.long(), labels=tgt.masked_fill(~tgt_mask, -100))
    run_ctx.mark_as_loss(name="ce", loss=out.loss)
    run_ctx.mark_as_loss(name="fer", loss=(out.logits.argmax(-1) != tgt)[tgt_mask].float().mean(), as_error=True)
