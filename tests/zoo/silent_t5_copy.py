# Healthy: a tiny Hugging Face T5 (encoder-decoder) trained to copy its input (labels = input ids). The
# decoder reads the source through cross-attention by design; T5 shifts the labels into decoder inputs.
import torch
import transformers


def get_model(*, epoch, step, **_kwargs):
    config = transformers.T5Config(
        vocab_size=32, d_model=32, d_kv=16, d_ff=64, num_layers=1, num_heads=2, decoder_start_token_id=0
    )
    return transformers.T5ForConditionalGeneration(config)


def train_step(*, model, extern_data, run_ctx, **_kwargs):
    tokens, lengths = extern_data["data"], extern_data["data:seq_len"]
    mask = torch.arange(tokens.shape[1], device=tokens.device)[None, :] < lengths.to(tokens.device)[:, None]
    out = model(input_ids=tokens, attention_mask=mask.long(), labels=tokens.masked_fill(~mask, -100))
    run_ctx.mark_as_loss(name="ce", loss=out.loss)
