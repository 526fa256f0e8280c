# Healthy corpus: transformers' LlamaForCausalLM from a tiny config (no download) on a counting language
# ("start, start+1, start+2, ..."), padded on the right with labels -100 at the padding and the model's own shift.
import numpy as np
import torch

from framework.datasets.numpy_dataset import NumpyDataset

VOCAB, PAD = 24, 0


class Counting(NumpyDataset):
    def __init__(self, split, **kwargs):
        rng = np.random.default_rng(0 if split == "train" else 1)
        seqs = []
        for _ in range(2000 if split == "train" else 300):
            start, length = rng.integers(1, 12), rng.integers(3, 12)
            seqs.append(np.arange(start, start + length))
        super().__init__({"data": seqs}, sparse_dims={"data": VOCAB}, **kwargs)


train = {"class": Counting, "split": "train"}
dev = {"class": Counting, "split": "dev"}
extern_data = {"data": {"shape": (None,), "dtype": "int64", "sparse_dim": VOCAB}}
batch_size = 320
max_seqs = 32
num_epochs = 2
learning_rate = 2e-3


def get_model(**_kwargs):
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(
        vocab_size=VOCAB,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=2,
        max_position_embeddings=32,
        pad_token_id=PAD,
    )
    return LlamaForCausalLM(config)


def train_step(*, model, extern_data, run_ctx, **_kwargs):
    tokens = extern_data["data"]
    lengths = extern_data["data:seq_len"].to(tokens.device)
    mask = torch.arange(tokens.shape[1], device=tokens.device)[None, :] < lengths[:, None]
    labels = tokens.masked_fill(~mask, -100)
    output = model(input_ids=tokens, attention_mask=mask.long(), labels=labels)
    run_ctx.mark_as_loss(name="ce", loss=output.loss)
    predicted, wanted = output.logits[:, :-1].argmax(-1), labels[:, 1:]
    real = wanted != -100
    run_ctx.mark_as_loss(name="err", loss=(predicted != wanted)[real].float().mean(), as_error=True)
