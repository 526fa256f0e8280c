# Library zoo: a healthy Hugging Face BERT classifier over 4 classes (which of tokens 5 and 7 occur),
# on top of lib_bert.py; labels go to the model, which uses cross-entropy for num_labels > 1.
import numpy as np
import transformers

_labels = np.array([int(5 in s) + 2 * int(7 in s) for s in _seqs])
for _split, _part in (("train", slice(0, 64)), ("dev", slice(64, None))):
    globals()[_split]["arrays"]["classes"] = _labels[_part]
    globals()[_split]["sparse_dims"]["classes"] = 4
extern_data["classes"]["sparse_dim"] = 4
num_labels = 4


def get_model(*, epoch, step, **_kwargs):
    config = transformers.BertConfig(
        vocab_size=32,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=16,
        num_labels=num_labels,
    )
    return transformers.BertForSequenceClassification(config)


def labels_of(classes):
    return classes


def train_step(*, model, extern_data, run_ctx, **_kwargs):
    tokens, lengths = extern_data["data"], extern_data["data:seq_len"]
    mask = torch.arange(tokens.shape[1], device=tokens.device)[None, :] < lengths.to(tokens.device)[:, None]
    out = model(input_ids=tokens, attention_mask=mask.long(), labels=labels_of(extern_data["classes"]))
    run_ctx.mark_as_loss(name="loss", loss=out.loss)
