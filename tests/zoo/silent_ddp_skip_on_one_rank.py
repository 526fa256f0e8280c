# Bug: a callback that skips the update of outlier batches, judged by the local loss: each rank decides for its own
# batch, so some updates are applied on one rank and skipped on the other, and the replicas part for good.
torch_distributed = {}


def skip_outliers(state):
    if float(state.run_ctx.total_loss()) > 1.5:
        state.control.skip_update()


callbacks = {"before_optimizer_step": skip_outliers}
