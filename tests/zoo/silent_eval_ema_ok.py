# Healthy: an EMA copy for evaluation that copies the buffers (batch-norm statistics, spectral-norm
# vectors) of the trained network along with averaging its parameters.


class WithEma(WithEma):
    def update_ema(self, decay=0.9):
        super().update_ema(decay)
        for e, b in zip(self.ema.buffers(), self.net.buffers(), strict=True):
            e.copy_(b)
