# Zoo healthy: train_step replaces a random fifth of each sequence's symbols in training (token dropout, drawn per
# row), so one sequence repeated over a batch gets other outputs at other places: randomness, not the place.
import torch


def train_step(*, model, extern_data, run_ctx, **_kwargs):
    symbols = extern_data["data"]
    if run_ctx.train_flag:  # augmentation in training only
        symbols = torch.where(torch.rand(symbols.shape, device=symbols.device) < 0.2, 0, symbols)
    logits = model(symbols)
    targets, lengths = extern_data["classes"], extern_data["classes:seq_len"]
    mask = torch.arange(targets.shape[1], device=targets.device)[None, :] < lengths.to(targets.device)[:, None]
    run_ctx.mark_as_loss(name="ce", loss=torch.nn.functional.cross_entropy(logits[mask], targets[mask]))
