# Bug: train_step puts the Hugging Face model into eval mode ("no dropout while fine-tuning", or left
# over from a generation call) before computing the loss.
import torch


def train_step(*, model, extern_data, run_ctx, **_kwargs):
    tokens, lengths = extern_data["data"], extern_data["data:seq_len"]
    mask = torch.arange(tokens.shape[1], device=tokens.device)[None, :] < lengths.to(tokens.device)[:, None]
    model.eval()
    out = model(input_ids=tokens, attention_mask=mask.long(), labels=labels_of(tokens, mask))
    run_ctx.mark_as_loss(name="ce", loss=out.loss)
