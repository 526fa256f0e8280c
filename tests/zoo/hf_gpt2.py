# Zoo: a healthy tiny Hugging Face GPT-2 language model (GPT2LMHeadModel from a small GPT2Config,
# random init), whose output layer lm_head is tied to the token embedding wte (one parameter, two
# uses). Each sequence repeats a random motif of 4 tokens: after the first one, it can be copied.
import numpy as np
import transformers

transformers.logging.set_verbosity_error()

_rng = np.random.default_rng(0)
_tokens = np.tile(_rng.integers(0, 32, size=(1000, 4)), 3)
train = {"class": "NumpyDataset", "arrays": {"data": _tokens[:800]}, "sparse_dims": {"data": 32}}
dev = {"class": "NumpyDataset", "arrays": {"data": _tokens[800:]}, "sparse_dims": {"data": 32}}
extern_data = {"data": {"shape": (12,), "dtype": "int64", "sparse_dim": 32}}
batch_size = 32
num_epochs = 2
optimizer = {"class": "adamw", "weight_decay": 0.01}
learning_rate = 3e-3


def get_model(*, epoch, step, **_kwargs):
    config = transformers.GPT2Config(vocab_size=32, n_positions=16, n_embd=32, n_layer=2, n_head=2)
    model = transformers.GPT2LMHeadModel(config)
    assert model.lm_head.weight is model.transformer.wte.weight  # tied
    return model


def train_step(*, model, extern_data, run_ctx, **_kwargs):
    tokens = extern_data["data"]
    run_ctx.mark_as_loss(name="ce", loss=model(input_ids=tokens, labels=tokens).loss)
