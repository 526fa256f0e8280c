# Corpus bug (huggingface/trl#976): the pad token is the EOS token and the collator sets every label equal to the pad
# id to -100, the real EOS included, so the model never learns to stop. Task: a tiny GPT-2 (from a config, no
# download) on sequences "n x x ... x EOS" with n copies of x; the error is the share of sequences whose EOS is not
# predicted after the last x. Twin: ++bug False (labels masked by the attention mask).
import numpy as np
import torch

from framework.datasets.numpy_dataset import NumpyDataset

bug = True
EOS, VOCAB = 11, 12


class Counting(NumpyDataset):
    def __init__(self, split, **kwargs):
        rng = np.random.default_rng(0 if split == "train" else 1)
        counts = rng.integers(1, 8, size=2000 if split == "train" else 300)
        fill = rng.integers(8, 11, size=len(counts))
        seqs = [np.array([n] + [x] * n + [EOS], dtype=np.int64) for n, x in zip(counts, fill, strict=True)]
        super().__init__({"data": seqs}, sparse_dims={"data": VOCAB}, **kwargs)


train = {"class": Counting, "split": "train"}
dev = {"class": Counting, "split": "dev"}
extern_data = {"data": {"shape": (None,), "dtype": "int64", "sparse_dim": VOCAB}}
batch_size = 320
max_seqs = 32
num_epochs = 3
learning_rate = 3e-3


def get_model(**_kwargs):
    from transformers import GPT2Config, GPT2LMHeadModel

    config = GPT2Config(
        vocab_size=VOCAB,
        n_positions=16,
        n_embd=32,
        n_layer=2,
        n_head=2,
        eos_token_id=EOS,
        pad_token_id=EOS,
        bos_token_id=EOS,
    )
    return GPT2LMHeadModel(config)


def train_step(*, model, extern_data, run_ctx, **_kwargs):
    tokens, lengths = extern_data["data"], extern_data["data:seq_len"].to(extern_data["data"].device)
    attention_mask = torch.arange(tokens.shape[1], device=tokens.device)[None, :] < lengths[:, None]
    input_ids = tokens.masked_fill(~attention_mask, EOS)  # padded with the pad token, which is EOS
    labels = input_ids.clone()
    if bug:
        labels[input_ids == EOS] = -100
    else:
        labels[~attention_mask] = -100
    output = model(input_ids=input_ids, attention_mask=attention_mask.long(), labels=labels)
    run_ctx.mark_as_loss(name="ce", loss=output.loss)
    last_content = lengths - 2  # the position whose next token is the EOS
    predicted = output.logits[torch.arange(len(lengths)), last_content].argmax(-1)
    run_ctx.mark_as_loss(name="err", loss=(predicted != EOS).float().mean(), as_error=True)
