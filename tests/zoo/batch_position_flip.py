# Zoo healthy: train_step reverses a random half of the sequences in training (a flip drawn per row, as image
# pipelines flip horizontally), so one sequence repeated over a batch gets one of two outputs at each place; which
# places get which is the random draw's, and the largest difference between rows is the same under any seed.
import torch


def train_step(*, model, extern_data, run_ctx, **_kwargs):
    symbols = extern_data["data"]
    if run_ctx.train_flag:
        flip = torch.rand(len(symbols), device=symbols.device) < 0.5
        symbols = torch.where(flip[:, None], symbols.flip(1), symbols)
    logits = model(symbols)
    targets, lengths = extern_data["classes"], extern_data["classes:seq_len"]
    mask = torch.arange(targets.shape[1], device=targets.device)[None, :] < lengths.to(targets.device)[:, None]
    run_ctx.mark_as_loss(name="ce", loss=torch.nn.functional.cross_entropy(logits[mask], targets[mask]))
