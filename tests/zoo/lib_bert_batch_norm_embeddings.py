# Bug: token embeddings standardized over the batch axis (dim 0) where the feature axis was meant,
# then handed to BERT as inputs_embeds: each sequence's embeddings depend on the other sequences.
import torch


def train_step(*, model, extern_data, run_ctx, **_kwargs):
    tokens, lengths = extern_data["data"], extern_data["data:seq_len"]
    mask = torch.arange(tokens.shape[1], device=tokens.device)[None, :] < lengths.to(tokens.device)[:, None]
    embeddings = model.bert.embeddings.word_embeddings(tokens)
    embeddings = (embeddings - embeddings.mean(dim=0)) / (embeddings.std(dim=0) + 1e-5)
    logits = model(inputs_embeds=embeddings, attention_mask=mask.long()).logits
    run_ctx.mark_as_loss(name="ce", loss=loss_of(logits, extern_data["classes"]))
