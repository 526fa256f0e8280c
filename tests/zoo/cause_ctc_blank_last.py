# Zoo bug, over healthy_ctc.py: the symbols are renumbered 0..4 so that the blank can be the last output (5), as
# TensorFlow's CTC wants it, but F.ctc_loss keeps its default blank=0: symbol 0 is trained as the blank.
for _split in (train, dev):  # noqa: F821 (healthy_ctc.py's)
    _split["arrays"]["classes"] = [labels - 1 for labels in _split["arrays"]["classes"]]


def train_step(*, model, extern_data, run_ctx, **_kwargs):
    log_probs = model(extern_data["data"]).log_softmax(-1).transpose(0, 1)  # [T, B, C]; 5 is the blank
    loss = nn.functional.ctc_loss(  # noqa: F821
        log_probs, extern_data["classes"], extern_data["data:seq_len"], extern_data["classes:seq_len"]
    )
    run_ctx.mark_as_loss(name="ctc", loss=loss)
