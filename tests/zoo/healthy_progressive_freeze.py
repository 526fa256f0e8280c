# Healthy: after 10 steps a step_start callback freezes the first block (no gradient, batch norm in eval mode),
# again at every step since the engine's model.train() at each epoch start would undo the mode.
def freeze_after_warmup(state):
    if state.global_step >= 10:
        state.model[1].eval()
        state.model[0].requires_grad_(False)
        state.model[1].requires_grad_(False)


callbacks = {"step_start": freeze_after_warmup}
