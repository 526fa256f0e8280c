# Healthy: batch norm kept in eval mode by the model's own train() (frozen statistics, as detection
# backbones do with norm_eval=True).
class Net(Net):
    def train(self, mode=True):
        super().train(mode)
        self.norm.eval()
        return self
