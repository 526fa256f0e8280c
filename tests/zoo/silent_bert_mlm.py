# Healthy: a tiny Hugging Face BertForMaskedLM trained the usual way: 15% of the real tokens are picked,
# 80% of those replaced by [MASK] (id 2), 10% by a random token, 10% kept; labels -100 elsewhere. The
# prediction at a picked position reads that position, which holds the mask, not the answer.
import torch
import transformers

transformers.logging.set_verbosity_error()


def get_model(*, epoch, step, **_kwargs):
    config = transformers.BertConfig(
        vocab_size=32, hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64
    )
    return transformers.BertForMaskedLM(config)


def train_step(*, model, extern_data, run_ctx, **_kwargs):
    tokens, lengths = extern_data["data"], extern_data["data:seq_len"]
    real = torch.arange(tokens.shape[1], device=tokens.device)[None, :] < lengths.to(tokens.device)[:, None]
    picked = (torch.rand(tokens.shape, device=tokens.device) < 0.15) & real
    labels = tokens.masked_fill(~picked, -100)
    draw = torch.rand(tokens.shape, device=tokens.device)
    inputs = tokens.masked_fill(picked & (draw < 0.8), 2)
    swap = picked & (draw >= 0.8) & (draw < 0.9)
    inputs = torch.where(swap, torch.randint_like(tokens, 3, 32), inputs)
    out = model(input_ids=inputs, attention_mask=real.long(), labels=labels)
    run_ctx.mark_as_loss(name="ce", loss=out.loss)
