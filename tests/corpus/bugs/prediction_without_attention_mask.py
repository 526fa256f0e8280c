# Corpus bug (oliverguhr/german-sentiment#11): the prediction code of a BERT sentiment classifier (transformers)
# tokenises a batch of texts with padding=True but passes only the input_ids to the model, not the attention_mask, so
# the short texts of a batch attend to the padding and their predictions change with the longest text of the batch.
# Training fed the masks. Task: texts of 6 to 15 tokens (one in ten of 60 to 100) whose sentiment is whether positive words (3, 4) outnumber
# negative ones (5, 6); BertForSequenceClassification from a tiny config (no download). Evaluation runs the prediction
# path. Twin: ++bug False (the prediction path passes the attention mask).
import numpy as np
import torch
from torch import nn

from framework.datasets.numpy_dataset import NumpyDataset

bug = True
VOCAB, PAD, CLS = 24, 0, 1


class Reviews(NumpyDataset):
    def __init__(self, split, **kwargs):
        rng = np.random.default_rng(0 if split == "train" else 1)
        texts, labels = [], []
        for _ in range(3000 if split == "train" else 500):
            length = int(rng.integers(60, 101)) if rng.random() < 0.1 else int(rng.integers(6, 16))
            words = rng.integers(7, VOCAB, size=length)
            n_pos, n_neg = rng.integers(0, 4), rng.integers(0, 4)
            while n_pos == n_neg:
                n_neg = rng.integers(0, 4)
            slots = rng.permutation(length)[: n_pos + n_neg]
            words[slots[:n_pos]] = rng.integers(3, 5, size=n_pos)
            words[slots[n_pos:]] = rng.integers(5, 7, size=n_neg)
            texts.append(np.concatenate([[CLS], words]).astype(np.int64))
            labels.append(int(n_pos > n_neg))
        super().__init__(
            {"data": texts, "classes": np.array(labels)}, sparse_dims={"data": VOCAB, "classes": 2}, **kwargs
        )


train = {"class": Reviews, "split": "train"}
dev = {"class": Reviews, "split": "dev"}
extern_data = {
    "data": {"shape": (None,), "dtype": "int64", "sparse_dim": VOCAB},
    "classes": {"shape": (), "dtype": "int64", "sparse_dim": 2},
}
batch_size = 32 * 101
max_seqs = 32
num_epochs = 4
learning_rate = 1e-3


def get_model(**_kwargs):
    from transformers import BertConfig, BertForSequenceClassification

    config = BertConfig(
        vocab_size=VOCAB,
        hidden_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        intermediate_size=128,
        max_position_embeddings=104,
        pad_token_id=PAD,
        num_labels=2,
        hidden_dropout_prob=0.0,
        attention_probs_dropout_prob=0.0,
    )
    return BertForSequenceClassification(config)


def predict_sentiment(model, input_ids, attention_mask):
    """The prediction path (SentimentModel.predict_sentiment)."""
    if bug:
        return model(input_ids).logits
    return model(input_ids, attention_mask=attention_mask).logits


def train_step(*, model, extern_data, run_ctx, **_kwargs):
    tokens = extern_data["data"]
    lengths = extern_data["data:seq_len"].to(tokens.device)
    attention_mask = (torch.arange(tokens.shape[1], device=tokens.device)[None, :] < lengths[:, None]).long()
    if run_ctx.train_flag:
        logits = model(input_ids=tokens, attention_mask=attention_mask).logits
    else:
        logits = predict_sentiment(model, tokens, attention_mask)
    targets = extern_data["classes"]
    run_ctx.mark_as_loss(name="ce", loss=nn.functional.cross_entropy(logits, targets))
    run_ctx.mark_as_loss(name="err", loss=(logits.argmax(-1) != targets).float().mean(), as_error=True)
