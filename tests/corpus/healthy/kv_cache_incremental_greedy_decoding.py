# Healthy corpus: autoregressive evaluation with a key/value cache. A tiny GPT2LMHeadModel (transformers, from a
# config, no download) learns sequences that repeat a random 3-token motif (the motif is the prompt). Evaluation decodes greedily one token at a time, feeding only the
# newest token together with past_key_values from the previous step (use_cache=True), as generate() does, instead of
# rerunning the whole prefix. The error is the dev token error of the 9 generated tokens.
import numpy as np
import torch
from torch import nn

from framework.datasets.numpy_dataset import NumpyDataset

LENGTH, VOCAB, PROMPT = 12, 16, 3


class Progressions(NumpyDataset):
    def __init__(self, split, **kwargs):
        rng = np.random.default_rng(0 if split == "train" else 1)
        n = 2000 if split == "train" else 400
        motif = rng.integers(0, VOCAB, size=(n, PROMPT))
        x = np.tile(motif, (1, LENGTH // PROMPT))
        super().__init__({"data": x.astype(np.int64)}, sparse_dims={"data": VOCAB}, **kwargs)


train = {"class": Progressions, "split": "train"}
dev = {"class": Progressions, "split": "dev"}
extern_data = {"data": {"shape": (LENGTH,), "dtype": "int64", "sparse_dim": VOCAB}}
batch_size = 32
num_epochs = 3
learning_rate = 2e-3


def get_model(**_kwargs):
    from transformers import GPT2Config, GPT2LMHeadModel

    config = GPT2Config(
        vocab_size=VOCAB,
        n_positions=LENGTH,
        n_embd=64,
        n_layer=2,
        n_head=4,
        resid_pdrop=0.0,
        embd_pdrop=0.0,
        attn_pdrop=0.0,
        bos_token_id=0,
        eos_token_id=0,
    )
    return GPT2LMHeadModel(config)


@torch.no_grad()
def greedy_with_cache(model, prompt):
    out = model(input_ids=prompt, use_cache=True)
    past, tokens = out.past_key_values, [out.logits[:, -1].argmax(-1)]
    for _ in range(LENGTH - PROMPT - 1):
        out = model(input_ids=tokens[-1][:, None], past_key_values=past, use_cache=True)
        past = out.past_key_values
        tokens.append(out.logits[:, -1].argmax(-1))
    return torch.stack(tokens, 1)


def train_step(*, model, extern_data, run_ctx, **_kwargs):
    tokens = extern_data["data"]
    logits = model(input_ids=tokens).logits
    run_ctx.mark_as_loss(name="ce", loss=nn.functional.cross_entropy(logits[:, :-1].transpose(1, 2), tokens[:, 1:]))
    if run_ctx.train_flag:
        predicted = logits[:, PROMPT - 1 : -1].argmax(-1)
    else:
        predicted = greedy_with_cache(model, tokens[:, :PROMPT])
    run_ctx.mark_as_loss(name="err", loss=(predicted != tokens[:, PROMPT:]).float().mean(), as_error=True)
