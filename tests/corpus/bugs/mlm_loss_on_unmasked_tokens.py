# Corpus bug (lucidrains/mlm-pytorch#3): the masked-language-model wrapper took its cross-entropy against the original
# sequence at every position, so most of the loss asked the model to copy the tokens it could see and the masked
# positions, the only ones that teach anything, were a small share of it; the fix ('loss only for masked tokens')
# sets the labels of the unmasked positions to the ignore index. Task: masked-LM pretraining of a tiny
# transformers BertForMaskedLM (from a config, no download) on sequences of a Markov chain over 30 tokens in which
# each token has two possible successors, so a masked token is mostly determined by its neighbours. BERT's masking
# (15% of the positions; 80% [MASK], 10% a random token, 10% unchanged) is drawn in the step, as a data collator
# does. 'err' is the error of the predictions at the masked positions. Twin: ++bug False (labels -100 elsewhere).
import numpy as np
import torch

from framework.datasets.numpy_dataset import NumpyDataset

bug = True
CONTENT, LENGTH, MASK, FIRST = 30, 24, 1, 2  # ids: 0 padding (unused), 1 [MASK], 2.. the content tokens
VOCAB = FIRST + CONTENT


def chains(seed, n):
    rng = np.random.default_rng(seed)
    tokens = np.empty((n, LENGTH), dtype=np.int64)
    tokens[:, 0] = rng.integers(0, CONTENT, size=n)
    for t in range(1, LENGTH):
        tokens[:, t] = (7 * tokens[:, t - 1] + 3 * rng.integers(0, 2, size=n)) % CONTENT
    return tokens + FIRST


class Chains(NumpyDataset):
    def __init__(self, split, **kwargs):
        tokens = chains(0 if split == "train" else 1, 8000 if split == "train" else 500)
        super().__init__({"data": tokens}, sparse_dims={"data": VOCAB}, **kwargs)


train = {"class": Chains, "split": "train"}
dev = {"class": Chains, "split": "dev"}
extern_data = {"data": {"shape": (LENGTH,), "dtype": "int64", "sparse_dim": VOCAB}}
batch_size = 64
num_epochs = 6
learning_rate = 2e-3


def get_model(**_kwargs):
    from transformers import BertConfig, BertForMaskedLM

    config = BertConfig(
        vocab_size=VOCAB,
        hidden_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        intermediate_size=128,
        max_position_embeddings=LENGTH,
        hidden_dropout_prob=0.0,
        attention_probs_dropout_prob=0.0,
        pad_token_id=0,
    )
    return BertForMaskedLM(config)


def mask_tokens(tokens):
    """BERT's masking: 15% of the positions are chosen; 80% of those become [MASK], 10% a random token."""
    chosen = torch.rand(tokens.shape, device=tokens.device) < 0.15
    draw = torch.rand(tokens.shape, device=tokens.device)
    inputs = tokens.clone()
    inputs[chosen & (draw < 0.8)] = MASK
    randomised = chosen & (draw >= 0.8) & (draw < 0.9)
    inputs[randomised] = torch.randint(FIRST, VOCAB, tokens.shape, device=tokens.device)[randomised]
    return inputs, chosen


def train_step(*, model, extern_data, run_ctx, **_kwargs):
    tokens = extern_data["data"]
    inputs, chosen = mask_tokens(tokens)
    labels = tokens if bug else tokens.masked_fill(~chosen, -100)  # bug: the loss covers every position
    out = model(input_ids=inputs, labels=labels)
    run_ctx.mark_as_loss(name="mlm", loss=out.loss)
    wrong = (out.logits.argmax(-1) != tokens) & chosen
    run_ctx.mark_as_loss(name="err", loss=wrong.sum().float() / chosen.sum().clamp(min=1), as_error=True)
