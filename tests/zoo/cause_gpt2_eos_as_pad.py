# Zoo bug (after huggingface/trl#976, written anew; on lib_gpt2.py): every sequence ends with an end-of-sequence
# token, the batches are padded with that same id (pad = EOS, as many GPT-2 setups do), and the labels are masked by
# value (labels == pad id -> -100), which masks the real EOS too: the model never learns to stop.
import numpy as np
import torch

EOS = 31
_rng = np.random.default_rng(0)
_seqs = [np.append(_rng.integers(1, EOS, size=_rng.integers(3, 12)), EOS) for _ in range(96)]
train = {"class": "NumpyDataset", "arrays": {"data": _seqs[:64]}, "sparse_dims": {"data": 32}}
dev = {"class": "NumpyDataset", "arrays": {"data": _seqs[64:]}, "sparse_dims": {"data": 32}}


def train_step(*, model, extern_data, run_ctx, **_kwargs):
    tokens, lengths = extern_data["data"], extern_data["data:seq_len"]
    mask = torch.arange(tokens.shape[1], device=tokens.device)[None, :] < lengths.to(tokens.device)[:, None]
    input_ids = tokens.masked_fill(~mask, EOS)  # padded with the pad id, which is the EOS id
    labels = input_ids.masked_fill(input_ids == EOS, -100)  # meant: the padding; hits every EOS too
    out = model(input_ids=input_ids, attention_mask=mask.long(), labels=labels)
    run_ctx.mark_as_loss(name="ce", loss=out.loss)
