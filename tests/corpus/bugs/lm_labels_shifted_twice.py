# Corpus bug (wdndev/tiny-llm-zh#10): the pre-training dataset returns input_ids = sample[:-1] and labels = sample[1:],
# already shifted, and the causal LM's forward shifts logits and labels by one again (logits[..., :-1, :] against
# labels[..., 1:]), so the model is trained to predict the token after next instead of the next token (the author:
# "a big problem"). Task: pre-training a tiny LlamaForCausalLM (transformers, from a config, no download) on token
# streams from a Markov chain (each token is followed by its own successor with probability 0.85, else by a random
# token); the model computes its loss from labels= as in the repository. The error is the dev next-token prediction
# error (0.14 at best: the random successors). Twin: ++bug False (labels = a copy of input_ids).
import numpy as np

from framework.datasets.numpy_dataset import NumpyDataset

bug = True
VOCAB, LENGTH, FOLLOW = 32, 25, 0.85
SUCCESSOR = np.random.default_rng(21).permutation(VOCAB)


class PTMDataset(NumpyDataset):
    def __init__(self, split, **kwargs):
        rng = np.random.default_rng(0 if split == "train" else 1)
        n = 2000 if split == "train" else 300
        samples = np.empty((n, LENGTH), dtype=np.int64)
        samples[:, 0] = rng.integers(0, VOCAB, size=n)
        for t in range(1, LENGTH):
            follow = rng.random(n) < FOLLOW
            samples[:, t] = np.where(follow, SUCCESSOR[samples[:, t - 1]], rng.integers(0, VOCAB, size=n))
        input_ids = samples[:, :-1]
        labels = samples[:, 1:] if bug else samples[:, :-1].copy()
        super().__init__({"data": input_ids, "labels": labels}, sparse_dims={"data": VOCAB, "labels": VOCAB}, **kwargs)


train = {"class": PTMDataset, "split": "train"}
dev = {"class": PTMDataset, "split": "dev"}
extern_data = {
    "data": {"shape": (LENGTH - 1,), "dtype": "int64", "sparse_dim": VOCAB},
    "labels": {"shape": (LENGTH - 1,), "dtype": "int64", "sparse_dim": VOCAB},
}
batch_size = 32
num_epochs = 3
learning_rate = 2e-3


def get_model(**_kwargs):
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(
        vocab_size=VOCAB,
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=4,
        max_position_embeddings=LENGTH,
        bos_token_id=0,
        eos_token_id=1,
        pad_token_id=None,
    )
    return LlamaForCausalLM(config)


def train_step(*, model, extern_data, run_ctx, **_kwargs):
    input_ids = extern_data["data"]
    out = model(input_ids=input_ids, labels=extern_data["labels"])  # the model shifts the labels itself
    run_ctx.mark_as_loss(name="ce", loss=out.loss)
    predicted = out.logits[:, :-1].argmax(-1)  # the prediction at position t is for token t + 1
    run_ctx.mark_as_loss(name="err", loss=(predicted != input_ids[:, 1:]).float().mean(), as_error=True)
